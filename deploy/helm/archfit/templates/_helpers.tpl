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

{{/* policy.excludedNamespaces with the release namespace, as a JSON list: archfit.yaml, both
webhook configurations' namespaceSelector and the policy's binding say the same. */}}
{{- define "archfit.excludedNamespaces" -}}
{{- $listed := ((.Values.config).policy).excludedNamespaces | default list }}
{{- append $listed .Release.Namespace | uniq | toJson }}
{{- end }}

{{/* The namespaceSelector of whatever archfit admits: not an excluded namespace, not one a
cluster admin labelled archfit.io/exclude=true (docs/webhook.md, "Infrastructure namespaces"). */}}
{{- define "archfit.namespaceSelector" -}}
matchExpressions:
- key: kubernetes.io/metadata.name
  operator: NotIn
  values: {{ include "archfit.excludedNamespaces" . }}
- key: archfit.io/exclude
  operator: NotIn
  values: ["true"]
{{- end }}

{{/* "true" when the chart installs archfit's MutatingAdmissionPolicy: admissionPolicy.enabled
true, or auto with the webhook on and a cluster that serves admissionregistration.k8s.io/v1
MutatingAdmissionPolicy (Kubernetes 1.36+; helm template: --api-versions names it). */}}
{{- define "archfit.admissionPolicy" -}}
{{- $asked := toString .Values.admissionPolicy.enabled }}
{{- if not (has $asked (list "auto" "true" "false")) }}
{{- fail (printf "admissionPolicy.enabled: %q is not auto, true or false" $asked) }}
{{- end }}
{{- $served := .Capabilities.APIVersions.Has "admissionregistration.k8s.io/v1/MutatingAdmissionPolicy" }}
{{- if or (eq $asked "true") (and (eq $asked "auto") .Values.webhook.enabled $served) }}true{{ end }}
{{- end }}

{{/* The pre-delete hook's labels (templates/uninstall-hook.yaml): none of the extender's
selector labels, so no Service or PodDisruptionBudget picks its pod. */}}
{{- define "archfit.uninstallLabels" -}}
{{ include "archfit.commonLabels" . }}
app.kubernetes.io/name: {{ include "archfit.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: uninstall
{{- end }}

{{/* A pre-delete hook object of the given weight, deleted when the hook succeeded (and
before a new one is made, after a failed uninstall). */}}
{{- define "archfit.uninstallHook" -}}
helm.sh/hook: pre-delete
helm.sh/hook-weight: {{ . | quote }}
helm.sh/hook-delete-policy: before-hook-creation,hook-succeeded
{{- end }}
