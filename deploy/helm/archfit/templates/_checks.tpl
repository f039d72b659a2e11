{{/*
Values that need each other, checked before anything renders: each combination that would
install an archfit that cannot work fails `helm install` with the fix. What one value alone
may hold is values.schema.json's to check.
*/}}
{{- define "archfit.checks" -}}
{{- $config := .Values.config | default dict }}
{{- $hook := $config.webhook | default dict }}
{{- $kube := $config.kubernetes | default dict }}
{{- $policy := $config.policy | default dict }}
{{- if hasKey $hook "enabled" }}
{{- fail "config.webhook.enabled: the chart sets it from webhook.enabled, which also installs the webhook's Service, configurations and certificate: set webhook.enabled instead" }}
{{- end }}
{{- if hasKey ($config.admissionPolicy | default dict) "enabled" }}
{{- fail "config.admissionPolicy.enabled: the chart sets it from admissionPolicy.enabled, which also installs the CRD, the policy, its binding and the publisher's RBAC: set admissionPolicy.enabled instead" }}
{{- end }}
{{- if and .Values.webhook.certManager.enabled (not .Values.webhook.enabled) }}
{{- fail "webhook.certManager.enabled needs webhook.enabled: without the webhook there is no certificate to issue" }}
{{- end }}
{{- $routed := $hook.schedulerName | default "" }}
{{- if $routed }}
{{- if not .Values.webhook.enabled }}
{{- fail (printf "config.webhook.schedulerName %s: only the webhook routes pods to a scheduler; set webhook.enabled=true" $routed) }}
{{- end }}
{{- if not (and .Values.secondScheduler.enabled (eq $routed .Values.secondScheduler.schedulerName)) }}
{{- fail (printf "config.webhook.schedulerName %s names no scheduler this release runs, and a pod routed to it would stay Pending: set secondScheduler.enabled=true with secondScheduler.schedulerName %s, or leave config.webhook.schedulerName empty" $routed $routed) }}
{{- end }}
{{- end }}
{{- if and .Values.secondScheduler.enabled .Values.secondScheduler.extender.nodeCacheCapable (eq (toString $kube.nodeIndex) "false") }}
{{- fail "secondScheduler.extender.nodeCacheCapable: true sends node names only, which archfit answers from its node index: keep config.kubernetes.nodeIndex true, or set secondScheduler.extender.nodeCacheCapable=false" }}
{{- end }}
{{- if and (not .Values.rbac.pullSecrets) (ne (toString $kube.pullSecrets) "false") }}
{{- fail "rbac.pullSecrets=false takes away archfit's right to read pull secrets, which config.kubernetes.pullSecrets still asks it to read (every private image would be unknown): set config.kubernetes.pullSecrets=false too" }}
{{- end }}
{{- $deadline := $hook.resolveDeadlineSeconds | default 2.0 | float64 }}
{{- if and .Values.webhook.enabled (le (float64 .Values.webhook.timeoutSeconds) $deadline) }}
{{- fail (printf "webhook.timeoutSeconds %v must be above config.webhook.resolveDeadlineSeconds %v: the API server would give up on archfit before archfit answers" .Values.webhook.timeoutSeconds $deadline) }}
{{- end }}
{{- if .Values.secondScheduler.enabled }}
{{- $timeout := .Values.secondScheduler.extender.httpTimeout }}
{{- $seconds := 0.0 }}
{{- if hasSuffix "ms" $timeout }}{{ $seconds = divf (trimSuffix "ms" $timeout | float64) 1000 }}
{{- else if hasSuffix "s" $timeout }}{{ $seconds = trimSuffix "s" $timeout | float64 }}
{{- else if hasSuffix "m" $timeout }}{{ $seconds = mulf (trimSuffix "m" $timeout | float64) 60 }}
{{- end }}
{{- $extenderDeadline := $policy.resolveDeadlineSeconds | default 1.5 | float64 }}
{{- if le $seconds $extenderDeadline }}
{{- fail (printf "secondScheduler.extender.httpTimeout %s must be above config.policy.resolveDeadlineSeconds %v: kube-scheduler would give up on archfit before archfit answers" $timeout $extenderDeadline) }}
{{- end }}
{{- end }}
{{- end -}}
