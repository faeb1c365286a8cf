{{/* The lock-controller's identity as the API server names it. */}}
{{- define "navique.lockControllerUser" -}}
system:serviceaccount:{{ .Release.Namespace }}:{{ .Values.lockController.serviceAccount.name }}
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
{{ .Release.Name }}-backup-runner.{{ .Release.Namespace }}.svc
{{- end -}}

{{/* The host names of the webhook's Service, as its certificate must name them. */}}
{{- define "navique.webhookDnsNames" -}}
{{- $service := .Values.webhook.serviceName -}}
{{- list $service (printf "%s.%s" $service .Release.Namespace) (printf "%s.%s.svc" $service .Release.Namespace) (printf "%s.%s.svc.cluster.local" $service .Release.Namespace) | toJson -}}
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
{{- $names = append $names "validatingwebhookconfigurations/navique-services" -}}
{{- $names = append $names "mutatingwebhookconfigurations/navique-services-defaults" -}}
{{- end -}}
{{- if and .Values.lockGuard.enabled (eq .Values.lockGuard.mode "webhook") -}}
{{- $names = append $names "validatingwebhookconfigurations/navique-lock-guard" -}}
{{- end -}}
{{- join "," $names -}}
{{- end -}}

{{/* Metadata annotations of a webhook configuration: cert-manager's CA injection. */}}
{{- define "navique.webhookAnnotations" -}}
{{- if eq .Values.webhook.tls.mode "certManager" }}
  annotations:
    cert-manager.io/inject-ca-from: {{ .Release.Namespace }}/{{ .Release.Name }}-webhook
{{- end }}
{{- end -}}

{{/*
A webhook's clientConfig, failurePolicy and timeout, indented for a webhook
entry; dict: root, path.
*/}}
{{- define "navique.webhookClient" -}}
{{- $values := .root.Values.webhook -}}
failurePolicy: {{ $values.failurePolicy }}
timeoutSeconds: {{ $values.timeoutSeconds }}
clientConfig:
  service:
    namespace: {{ .root.Release.Namespace }}
    name: {{ $values.serviceName }}
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
      values: [{{ .Release.Namespace | quote }}]
{{- end -}}
