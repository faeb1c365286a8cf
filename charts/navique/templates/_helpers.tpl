{{/* The namespace of every namespaced object: namespaceOverride, else the release's. */}}
{{- define "navique.namespace" -}}
{{ .Values.namespaceOverride | default .Release.Namespace }}
{{- end -}}

{{/* A component's ServiceAccount: serviceAccount.name, else <release>-<component>; dict: root, component, values. */}}
{{- define "navique.serviceAccountName" -}}
{{ .values.serviceAccount.name | default (include "navique.componentName" .) }}
{{- end -}}

{{/* The lock-controller's identity as the API server names it. */}}
{{- define "navique.lockControllerUser" -}}
system:serviceaccount:{{ include "navique.namespace" . }}:{{ include "navique.serviceAccountName" (dict "root" . "component" "lock-controller" "values" .Values.lockController) }}
{{- end -}}

{{/*
A component's image: [<image.registry>/]<repository>:<tag>, the tag falling
back to image.tag, then to the chart's appVersion; dict: root, values.
*/}}
{{- define "navique.image" -}}
{{- $global := .root.Values.image -}}
{{- $image := .values.image -}}
{{- $registry := $global.registry -}}
{{- $tag := $image.tag | default $global.tag | default .root.Chart.AppVersion -}}
{{- if $registry -}}{{ trimSuffix "/" $registry }}/{{ end -}}{{ $image.repository }}:{{ $tag }}
{{- end -}}

{{/* The webhook's Service: webhook.serviceName, else <release>-webhook. */}}
{{- define "navique.webhookServiceName" -}}
{{ .Values.webhook.serviceName | default (printf "%s-webhook" .Release.Name) }}
{{- end -}}

{{/* The webhook's serving Secret: webhook.tls.secretName, else <release>-webhook-tls. */}}
{{- define "navique.webhookTlsSecretName" -}}
{{ .Values.webhook.tls.secretName | default (printf "%s-webhook-tls" .Release.Name) }}
{{- end -}}

{{/* A gRPC TLS Secret: its value in grpc.tls, else <release>-<suffix>; dict: root, value, suffix. */}}
{{- define "navique.grpcSecretName" -}}
{{ .value | default (printf "%s-%s" .root.Release.Name .suffix) }}
{{- end -}}

{{/*
The Lock guard's groups (lockGuard.groups) as the API names them: "core"
becomes the core group "" (JSON list).
*/}}
{{- define "navique.lockGroups" -}}
{{- $groups := list -}}
{{- range .Values.lockGuard.groups }}
{{- $groups = append $groups (eq . "core" | ternary "" .) -}}
{{- end }}
{{- $groups | uniq | toJson -}}
{{- end -}}

{{/*
The resources the Lock guard matches and the lock-controller may stamp, per
group (JSON list of {group, resources}): lockGuard.resources.<group> when
set, else all of the group's ("*"). The core group must list its resources:
"*" would grant the lock-controller every Secret, Pod and ConfigMap of the
cluster.
*/}}
{{- define "navique.lockResources" -}}
{{- $out := list -}}
{{- $groups := include "navique.lockGroups" . | fromJsonArray -}}
{{- range $key, $_ := .Values.lockGuard.resources }}
{{- if not (has (eq $key "core" | ternary "" $key) $groups) }}
{{- fail (printf "lockGuard.resources.%s: %s is not in lockGuard.groups" $key $key) }}
{{- end }}
{{- end }}
{{- range $groups }}
{{- $key := eq . "" | ternary "core" . -}}
{{- $resources := get $.Values.lockGuard.resources $key -}}
{{- if and (eq . "") (not $resources) }}
{{- fail "lockGuard.resources.core must list the core resources Locks may protect, e.g. [persistentvolumeclaims, secrets, configmaps, services], when lockGuard.groups names core" }}
{{- end }}
{{- $out = append $out (dict "group" . "resources" ($resources | default (list "*"))) -}}
{{- end }}
{{- toJson $out -}}
{{- end -}}

{{/* A CEL expression for one annotation of an object, '' when absent. */}}
{{- define "navique.annotation" -}}
has({{ .object }}.metadata.annotations) && '{{ .key }}' in {{ .object }}.metadata.annotations ? {{ .object }}.metadata.annotations['{{ .key }}'] : ''
{{- end -}}

{{/* The labels every object of the release carries. */}}
{{- define "navique.labels" -}}
app.kubernetes.io/name: {{ .Chart.Name }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- with .Values.commonLabels }}
{{ toYaml . }}
{{- end }}
{{- end -}}

{{/* The labels that select one component's pods; dict: root, component. */}}
{{- define "navique.selectorLabels" -}}
app.kubernetes.io/name: {{ .root.Chart.Name }}
app.kubernetes.io/instance: {{ .root.Release.Name }}
app.kubernetes.io/component: {{ .component }}
{{- end -}}

{{/* The labels of one component's objects; dict: root, component. */}}
{{- define "navique.componentLabels" -}}
{{ include "navique.labels" .root }}
app.kubernetes.io/component: {{ .component }}
app.kubernetes.io/version: {{ .root.Chart.AppVersion | quote }}
app.kubernetes.io/part-of: navique
{{- end -}}

{{/* The name of a component's objects: <release>-<component>; dict: root, component. */}}
{{- define "navique.componentName" -}}
{{ .root.Release.Name }}-{{ .component }}
{{- end -}}

{{/* The gRPC Service of backup-runner, as a host name the controller dials. */}}
{{- define "navique.backupRunnerHost" -}}
{{ .Release.Name }}-backup-runner.{{ include "navique.namespace" . }}.svc
{{- end -}}

{{/* The host names of the webhook's Service, as its certificate must name them. */}}
{{- define "navique.webhookDnsNames" -}}
{{- $service := include "navique.webhookServiceName" . -}}
{{- $namespace := include "navique.namespace" . -}}
{{- list $service (printf "%s.%s" $service $namespace) (printf "%s.%s.svc" $service $namespace) (printf "%s.%s.svc.cluster.local" $service $namespace) | toJson -}}
{{- end -}}

{{/* The Issuer of the chart's cert-manager Certificates. */}}
{{- define "navique.issuerRef" -}}
{{- $ref := .Values.certManager.issuerRef -}}
{{- if $ref.name -}}
{{ toJson (dict "name" $ref.name "kind" $ref.kind "group" $ref.group) }}
{{- else -}}
{{ toJson (dict "name" (printf "%s-ca" .Release.Name) "kind" "Issuer" "group" "cert-manager.io") }}
{{- end -}}
{{- end -}}

{{/*
The webhook configurations the chart renders, as "<resource>/<name>": the
self-managed CA keeps their caBundle current.
*/}}
{{- define "navique.webhookConfigurations" -}}
{{- $names := list -}}
{{- if .Values.managedServices.admission.enabled -}}
{{- $names = append $names (printf "validatingwebhookconfigurations/%s-services" .Release.Name) -}}
{{- $names = append $names (printf "mutatingwebhookconfigurations/%s-services-defaults" .Release.Name) -}}
{{- end -}}
{{- if and .Values.lockGuard.enabled (eq .Values.lockGuard.mode "webhook") -}}
{{- $names = append $names (printf "validatingwebhookconfigurations/%s-lock-guard" .Release.Name) -}}
{{- $names = append $names (printf "validatingwebhookconfigurations/%s-lock-suspension" .Release.Name) -}}
{{- end -}}
{{- if .Values.lockController.finalizerWebhook.enabled -}}
{{- $names = append $names (printf "mutatingwebhookconfigurations/%s-lock-finalizer" .Release.Name) -}}
{{- end -}}
{{- join "," $names -}}
{{- end -}}

{{/* Metadata annotations of a webhook configuration: cert-manager's CA injection. */}}
{{- define "navique.webhookAnnotations" -}}
{{- if eq .Values.webhook.tls.mode "certManager" }}
  annotations:
    cert-manager.io/inject-ca-from: {{ include "navique.namespace" . }}/{{ .Release.Name }}-webhook
{{- end }}
{{- end -}}

{{/*
A webhook's clientConfig, failurePolicy and timeout, indented for a webhook
entry; dict: root, path, and optionally failurePolicy and timeoutSeconds
in place of the webhook's values.
*/}}
{{- define "navique.webhookClient" -}}
{{- $values := .root.Values.webhook -}}
failurePolicy: {{ .failurePolicy | default $values.failurePolicy }}
timeoutSeconds: {{ .timeoutSeconds | default $values.timeoutSeconds }}
clientConfig:
  service:
    namespace: {{ include "navique.namespace" .root }}
    name: {{ include "navique.webhookServiceName" .root }}
    path: {{ .path }}
    port: 443
  {{- with $values.caBundle }}
  caBundle: {{ . }}
  {{- end }}
{{- end -}}

{{/* Excludes the release namespace: it holds no Project's objects. */}}
{{- define "navique.notReleaseNamespace" -}}
namespaceSelector:
  matchExpressions:
    - key: kubernetes.io/metadata.name
      operator: NotIn
      values: [{{ include "navique.namespace" . | quote }}]
{{- end -}}

{{/* The host names of backup-runner's gRPC Service, as its certificate names them (JSON list). */}}
{{- define "navique.backupRunnerDnsNames" -}}
{{- $service := printf "%s-backup-runner" .Release.Name -}}
{{- $namespace := include "navique.namespace" . -}}
{{- list $service (printf "%s.%s" $service $namespace) (printf "%s.%s.svc" $service $namespace) (printf "%s.%s.svc.cluster.local" $service $namespace) | toJson -}}
{{- end -}}

{{/* The host names of the ApprovalEvents Service, as the controller's certificate names them (JSON list). */}}
{{- define "navique.approvalsDnsNames" -}}
{{- $service := printf "%s-approvals" .Release.Name -}}
{{- $namespace := include "navique.namespace" . -}}
{{- list $service (printf "%s.%s" $service $namespace) (printf "%s.%s.svc" $service $namespace) (printf "%s.%s.svc.cluster.local" $service $namespace) | toJson -}}
{{- end -}}

{{/*
A component's internal gRPC TLS (grpc.tls.mode), as JSON: its flags
("args"), and the Secret volume and mount of the files modes ("volumes",
"volumeMounts"); dict: root, component, secretName (files modes), dnsNames
(JSON list: the names its gRPC server is dialled at).
*/}}
{{- define "navique.grpcTls" -}}
{{- $tls := .root.Values.grpc.tls -}}
{{- $out := dict "args" (list) "volumes" (list) "volumeMounts" (list) -}}
{{- if eq $tls.mode "disabled" }}
{{- $_ := set $out "args" (list "--grpc-insecure-plaintext") -}}
{{- else if eq $tls.mode "selfManaged" }}
{{- $managed := $tls.selfManaged -}}
{{- if not (lt (int $managed.renewBeforeDays) (int $managed.certificateValidityDays)) }}
{{- fail (printf "grpc.tls.selfManaged.renewBeforeDays (%v) must be less than certificateValidityDays (%v)" $managed.renewBeforeDays $managed.certificateValidityDays) }}
{{- end }}
{{- if not (lt (int $managed.certificateValidityDays) (int $managed.caValidityDays)) }}
{{- fail (printf "grpc.tls.selfManaged.certificateValidityDays (%v) must be less than caValidityDays (%v)" $managed.certificateValidityDays $managed.caValidityDays) }}
{{- end }}
{{- $_ := set $out "args" (list
  (printf "--grpc-ca-secret=%s/%s" (include "navique.namespace" .root) (include "navique.grpcSecretName" (dict "root" .root "value" $managed.caSecretName "suffix" "grpc-ca")))
  (printf "--grpc-dns-names=%s" (.dnsNames | fromJsonArray | join ","))
  (printf "--grpc-ca-validity-days=%v" $managed.caValidityDays)
  (printf "--grpc-cert-validity-days=%v" $managed.certificateValidityDays)
  (printf "--grpc-cert-renew-before-days=%v" $managed.renewBeforeDays)) -}}
{{- else }}
{{- $_ := set $out "args" (list
  "--grpc-tls-cert-file=/etc/navique/grpc-tls/tls.crt"
  "--grpc-tls-key-file=/etc/navique/grpc-tls/tls.key"
  "--grpc-tls-ca-file=/etc/navique/grpc-tls/ca.crt") -}}
{{- $_ := set $out "volumes" (list (dict "name" "grpc-tls" "secret" (dict "secretName" .secretName))) -}}
{{- $_ := set $out "volumeMounts" (list (dict "name" "grpc-tls" "mountPath" "/etc/navique/grpc-tls" "readOnly" true)) -}}
{{- end }}
{{- toJson $out -}}
{{- end -}}

{{/*
grpc.tls.mode selfManaged: the Role on the gRPC CA Secret of a component
that issues itself certificates from it; dict: root, component, values.
*/}}
{{- define "navique.grpcCaRole" -}}
{{- if eq .root.Values.grpc.tls.mode "selfManaged" }}
{{- $rules := printf `# selfManaged gRPC TLS: the component creates the gRPC CA Secret when it
# is absent (create cannot be limited to a name)...
- apiGroups: [""]
  resources: ["secrets"]
  verbs: ["create"]
# ...and reads and rotates it (get, patch), and no other Secret of the
# release namespace: whoever reads its key can mint any identity.
- apiGroups: [""]
  resources: ["secrets"]
  resourceNames: [%q]
  verbs: ["get", "patch"]` (include "navique.grpcSecretName" (dict "root" .root "value" .root.Values.grpc.tls.selfManaged.caSecretName "suffix" "grpc-ca")) }}
{{ include "navique.role" (dict "root" .root "component" .component "values" .values "suffix" "grpc-ca" "rules" $rules) }}
{{- end }}
{{- end -}}
