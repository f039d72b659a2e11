{{/* Chart name, overridable. */}}
{{- define "archfit.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* Object name: the release name when it already says archfit, so release `archfit` names everything `archfit`. */}}
{{- define "archfit.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- $name := default .Chart.Name .Values.nameOverride }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{- define "archfit.webhookFullname" -}}
{{- printf "%s-webhook" (include "archfit.fullname" .) | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "archfit.webhookLabels" -}}
{{ include "archfit.commonLabels" . }}
app.kubernetes.io/name: {{ include "archfit.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: webhook
{{- end }}

{{- define "archfit.schedulerFullname" -}}
{{- printf "%s-scheduler" (include "archfit.fullname" .) | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* Labels besides the selector labels (which carry name, instance and component). */}}
{{- define "archfit.commonLabels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: archfit
{{- end }}

{{/* The extender's selector labels. */}}
{{- define "archfit.selectorLabels" -}}
app.kubernetes.io/name: {{ include "archfit.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: extender
{{- end }}

{{- define "archfit.labels" -}}
{{ include "archfit.commonLabels" . }}
{{ include "archfit.selectorLabels" . }}
{{- end }}

{{/* The second scheduler's selector labels. */}}
{{- define "archfit.schedulerSelectorLabels" -}}
app.kubernetes.io/name: {{ include "archfit.name" . }}-scheduler
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: scheduler
{{- end }}

{{- define "archfit.schedulerLabels" -}}
{{ include "archfit.commonLabels" . }}
{{ include "archfit.schedulerSelectorLabels" . }}
{{- end }}

{{/* The port archfit listens on, from its own config. */}}
{{- define "archfit.port" -}}
{{- ((.Values.config).server).port | default 8888 }}
{{- end }}

{{/* What the scheduler's extender urlPrefix must be to reach the Service. */}}
{{- define "archfit.urlPrefix" -}}
{{- printf "http://%s.%s.svc:%v%s" (include "archfit.fullname" .) .Release.Namespace .Values.service.port (((.Values.config).server).prefix | default "/scheduler") }}
{{- end }}

{{/* Restricted Pod Security Standard, for both containers. */}}
{{- define "archfit.containerSecurityContext" -}}
allowPrivilegeEscalation: false
readOnlyRootFilesystem: true
capabilities:
  drop: ["ALL"]
{{- end }}

{{- define "archfit.podSecurityContext" -}}
runAsNonRoot: true
runAsUser: {{ .Values.runAsUser }}
runAsGroup: {{ .Values.runAsGroup }}
seccompProfile:
  type: RuntimeDefault
{{- end }}
