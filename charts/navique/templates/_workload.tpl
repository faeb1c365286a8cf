{{/*
What every component has: its ServiceAccount, its Deployment, the Service
in front of its admin server (/metrics) and its PodDisruptionBudget. The
component's values add extraArgs, extraEnv, extraVolumes,
extraVolumeMounts, podLabels and topologySpreadConstraints to what the
chart sets; without an affinity of its own, podAntiAffinity spreads its
replicas over nodes.

dict:
  root          the chart's context
  component     the binary's name, e.g. lock-controller
  values        the component's values (replicas, image, serviceAccount...)
  args          the component's own flags (a list)
  env           extra container env (YAML), optional
  envFrom       container envFrom (YAML), optional
  ports         extra container ports (YAML), optional
  volumes       extra volumes (YAML), optional
  volumeMounts  extra volume mounts (YAML), optional
  strategy      the Deployment strategy (YAML), optional
*/}}
{{- define "navique.workload" -}}
{{- $root := .root -}}
{{- $values := .values -}}
{{- $name := include "navique.componentName" . -}}
{{- $context := dict "root" $root "component" .component -}}
{{- $namespace := include "navique.namespace" $root -}}
{{- $selector := include "navique.selectorLabels" $context | fromYaml -}}
{{- $args := list (printf "--admin-addr=0.0.0.0:%v" $root.Values.adminPort) (printf "--log-format=%s" $root.Values.logFormat) (printf "--log-level=%s" $root.Values.logLevel) -}}
{{- with $root.Values.otlpEndpoint }}
{{- $args = append $args (printf "--otlp-endpoint=%s" .) -}}
{{- end }}
{{- $args = concat $args .args $values.extraArgs -}}
{{- /* The default anti-affinity: this component's pods on different nodes. */}}
{{- $affinity := $values.affinity -}}
{{- $antiAffinityTerm := dict "labelSelector" (dict "matchLabels" $selector) "topologyKey" "kubernetes.io/hostname" -}}
{{- if and (not $affinity) (eq $root.Values.podAntiAffinity "soft") }}
{{- $affinity = dict "podAntiAffinity" (dict "preferredDuringSchedulingIgnoredDuringExecution" (list (dict "weight" 100 "podAffinityTerm" $antiAffinityTerm))) -}}
{{- else if and (not $affinity) (eq $root.Values.podAntiAffinity "hard") }}
{{- $affinity = dict "podAntiAffinity" (dict "requiredDuringSchedulingIgnoredDuringExecution" (list $antiAffinityTerm)) -}}
{{- end }}
{{- /* A spread constraint without a labelSelector spreads this component's pods. */}}
{{- $spread := list -}}
{{- range $values.topologySpreadConstraints }}
{{- $constraint := deepCopy . -}}
{{- if not (hasKey $constraint "labelSelector") }}
{{- $_ := set $constraint "labelSelector" (dict "matchLabels" $selector) -}}
{{- end }}
{{- $spread = append $spread $constraint -}}
{{- end }}
apiVersion: v1
kind: ServiceAccount
metadata:
  name: {{ include "navique.serviceAccountName" . }}
  namespace: {{ $namespace }}
  labels:
    {{- include "navique.componentLabels" $context | nindent 4 }}
  {{- with $values.serviceAccount.annotations }}
  annotations:
    {{- toYaml . | nindent 4 }}
  {{- end }}
---
apiVersion: apps/v1
kind: Deployment
metadata:
  name: {{ $name }}
  namespace: {{ $namespace }}
  labels:
    {{- include "navique.componentLabels" $context | nindent 4 }}
spec:
  replicas: {{ $values.replicas }}
  {{- with .strategy }}
  strategy:
    {{- . | nindent 4 }}
  {{- end }}
  selector:
    matchLabels:
      {{- include "navique.selectorLabels" $context | nindent 6 }}
  template:
    metadata:
      labels:
        {{- include "navique.componentLabels" $context | nindent 8 }}
        {{- with $values.podLabels }}
        {{- toYaml . | nindent 8 }}
        {{- end }}
      {{- with $values.podAnnotations }}
      annotations:
        {{- toYaml . | nindent 8 }}
      {{- end }}
    spec:
      serviceAccountName: {{ include "navique.serviceAccountName" . }}
      {{- with $root.Values.imagePullSecrets }}
      imagePullSecrets:
        {{- toYaml . | nindent 8 }}
      {{- end }}
      {{- with $values.priorityClassName }}
      priorityClassName: {{ . }}
      {{- end }}
      securityContext:
        {{- toYaml $root.Values.podSecurityContext | nindent 8 }}
      {{- with $values.nodeSelector }}
      nodeSelector:
        {{- toYaml . | nindent 8 }}
      {{- end }}
      {{- with $values.tolerations }}
      tolerations:
        {{- toYaml . | nindent 8 }}
      {{- end }}
      {{- with $affinity }}
      affinity:
        {{- toYaml . | nindent 8 }}
      {{- end }}
      {{- with $spread }}
      topologySpreadConstraints:
        {{- toYaml . | nindent 8 }}
      {{- end }}
      containers:
        - name: {{ .component }}
          image: {{ include "navique.image" (dict "root" $root "values" $values) | quote }}
          imagePullPolicy: {{ $values.image.pullPolicy }}
          args:
            {{- toYaml $args | nindent 12 }}
          {{- if or .env $values.extraEnv }}
          env:
            {{- with .env }}
            {{- . | nindent 12 }}
            {{- end }}
            {{- with $values.extraEnv }}
            {{- toYaml . | nindent 12 }}
            {{- end }}
          {{- end }}
          {{- with .envFrom }}
          envFrom:
            {{- . | nindent 12 }}
          {{- end }}
          ports:
            - name: admin
              containerPort: {{ $root.Values.adminPort }}
              protocol: TCP
            {{- with .ports }}
            {{- . | nindent 12 }}
            {{- end }}
          # The admin server answers /healthz while the process runs and
          # /readyz once the component can serve (the API server answered,
          # and its own listeners and caches are up).
          livenessProbe:
            httpGet:
              path: /healthz
              port: admin
            periodSeconds: 10
            timeoutSeconds: 3
            failureThreshold: 3
          readinessProbe:
            httpGet:
              path: /readyz
              port: admin
            periodSeconds: 5
            timeoutSeconds: 3
            failureThreshold: 3
          resources:
            {{- toYaml $values.resources | nindent 12 }}
          securityContext:
            {{- toYaml $root.Values.containerSecurityContext | nindent 12 }}
          volumeMounts:
            # The root file system is read-only.
            - name: tmp
              mountPath: /tmp
            {{- with .volumeMounts }}
            {{- . | nindent 12 }}
            {{- end }}
            {{- with $values.extraVolumeMounts }}
            {{- toYaml . | nindent 12 }}
            {{- end }}
      volumes:
        - name: tmp
          emptyDir:
            sizeLimit: 64Mi
        {{- with .volumes }}
        {{- . | nindent 8 }}
        {{- end }}
        {{- with $values.extraVolumes }}
        {{- toYaml . | nindent 8 }}
        {{- end }}
---
# The admin server: /metrics for Prometheus (see metrics.serviceMonitor).
apiVersion: v1
kind: Service
metadata:
  name: {{ $name }}-metrics
  namespace: {{ $namespace }}
  labels:
    {{- include "navique.componentLabels" $context | nindent 4 }}
spec:
  selector:
    {{- include "navique.selectorLabels" $context | nindent 4 }}
  ports:
    - name: metrics
      port: {{ $root.Values.adminPort }}
      targetPort: admin
      protocol: TCP
{{- if $values.podDisruptionBudget.enabled }}
---
apiVersion: policy/v1
kind: PodDisruptionBudget
metadata:
  name: {{ $name }}
  namespace: {{ $namespace }}
  labels:
    {{- include "navique.componentLabels" $context | nindent 4 }}
spec:
  maxUnavailable: {{ $values.podDisruptionBudget.maxUnavailable }}
  selector:
    matchLabels:
      {{- include "navique.selectorLabels" $context | nindent 6 }}
{{- end }}
{{- end -}}

{{/*
A component's ClusterRole and its binding to the component's
ServiceAccount; dict: root, component, values, rules (YAML).
*/}}
{{- define "navique.clusterRole" -}}
{{- $name := include "navique.componentName" . -}}
{{- $context := dict "root" .root "component" .component -}}
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata:
  name: {{ $name }}
  labels:
    {{- include "navique.componentLabels" $context | nindent 4 }}
rules:
  {{- .rules | nindent 2 }}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata:
  name: {{ $name }}
  labels:
    {{- include "navique.componentLabels" $context | nindent 4 }}
roleRef:
  apiGroup: rbac.authorization.k8s.io
  kind: ClusterRole
  name: {{ $name }}
subjects:
  - kind: ServiceAccount
    name: {{ include "navique.serviceAccountName" . }}
    namespace: {{ include "navique.namespace" .root }}
{{- end -}}

{{/*
A component's Role in the release namespace and its binding; dict: root,
component, values, suffix (of the Role's name), rules (YAML).
*/}}
{{- define "navique.role" -}}
{{- $name := printf "%s-%s" (include "navique.componentName" .) .suffix -}}
{{- $context := dict "root" .root "component" .component -}}
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata:
  name: {{ $name }}
  namespace: {{ include "navique.namespace" .root }}
  labels:
    {{- include "navique.componentLabels" $context | nindent 4 }}
rules:
  {{- .rules | nindent 2 }}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata:
  name: {{ $name }}
  namespace: {{ include "navique.namespace" .root }}
  labels:
    {{- include "navique.componentLabels" $context | nindent 4 }}
roleRef:
  apiGroup: rbac.authorization.k8s.io
  kind: Role
  name: {{ $name }}
subjects:
  - kind: ServiceAccount
    name: {{ include "navique.serviceAccountName" . }}
    namespace: {{ include "navique.namespace" .root }}
{{- end -}}

{{/*
Leader election of a controller: its flags, the pod's name and namespace
(the Lease's identity and namespace), and a Role on its Lease, named after
the component, in the release namespace; dict: root, component, values.
*/}}
{{- define "navique.leaderElection.args" -}}
{{- $election := .Values.leaderElection -}}
{{- if ge (int $election.leaseGrace) (int $election.leaseDuration) -}}
{{- fail (printf "leaderElection.leaseGrace (%v) must be shorter than leaderElection.leaseDuration (%v)" $election.leaseGrace $election.leaseDuration) -}}
{{- end -}}
{{- list (printf "--leader-elect=%t" $election.enabled) (printf "--lease-duration=%v" $election.leaseDuration) (printf "--lease-grace=%v" $election.leaseGrace) | toJson -}}
{{- end -}}

{{- define "navique.leaderElection.env" -}}
- name: POD_NAME
  valueFrom:
    fieldRef:
      fieldPath: metadata.name
- name: POD_NAMESPACE
  valueFrom:
    fieldRef:
      fieldPath: metadata.namespace
{{- end -}}

{{- define "navique.leaderElection.role" -}}
{{- if .root.Values.leaderElection.enabled }}
{{- $rules := printf `# Leader election: the Lease is created on first start (create cannot be
# limited to a name)...
- apiGroups: ["coordination.k8s.io"]
  resources: ["leases"]
  verbs: ["create"]
# ...then read and renewed, taken over or released (the Lease is named
# after the component), and read again before a destructive step; a
# standby watches it (by name) to take over as soon as the leader releases it.
- apiGroups: ["coordination.k8s.io"]
  resources: ["leases"]
  resourceNames: [%q]
  verbs: ["get", "list", "watch", "patch"]` .component -}}
{{- include "navique.role" (merge (dict "suffix" "leader-election" "rules" $rules) .) }}
{{- end }}
{{- end -}}
