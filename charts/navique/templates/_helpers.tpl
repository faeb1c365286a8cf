{{/* The lock-controller's identity as the API server names it. */}}
{{- define "navique.lockControllerUser" -}}
system:serviceaccount:{{ .Release.Namespace }}:{{ .Values.lockController.serviceAccount.name }}
{{- end -}}

{{/* A CEL expression for one annotation of an object, '' when absent. */}}
{{- define "navique.annotation" -}}
has({{ .object }}.metadata.annotations) && '{{ .key }}' in {{ .object }}.metadata.annotations ? {{ .object }}.metadata.annotations['{{ .key }}'] : ''
{{- end -}}
