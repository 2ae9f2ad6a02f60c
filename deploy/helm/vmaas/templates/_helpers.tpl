{{/* The release's full name, 63 characters at most. */}}
{{- define "vmaas.fullname" -}}
{{- if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{/* Labels every object carries. */}}
{{- define "vmaas.labels" -}}
app.kubernetes.io/name: {{ .Chart.Name }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end -}}

{{/* The labels the server's pods are selected by. */}}
{{- define "vmaas.selector" -}}
app.kubernetes.io/name: {{ .Chart.Name }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: server
{{- end -}}

{{/* The ServiceAccount the server runs as. */}}
{{- define "vmaas.serviceAccount" -}}
{{- default (include "vmaas.fullname" .) .Values.serviceAccount.name -}}
{{- end -}}

{{/* The image: repository@digest, else repository:tag (the appVersion by default). */}}
{{- define "vmaas.image" -}}
{{- if .Values.image.digest -}}
{{- printf "%s@%s" .Values.image.repository .Values.image.digest -}}
{{- else -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) -}}
{{- end -}}
{{- end -}}

{{/* The API's scheme, for probes. */}}
{{- define "vmaas.scheme" -}}
{{- if .Values.tls.secretName -}}HTTPS{{- else -}}HTTP{{- end -}}
{{- end -}}
