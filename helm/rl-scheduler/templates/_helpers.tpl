{{/* The release's full name, cut to the 63 characters a label value allows. */}}
{{- define "rl-scheduler.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "rl-scheduler.fullname" -}}
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

{{- define "rl-scheduler.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{ include "rl-scheduler.selectorLabels" . }}
app.kubernetes.io/version: {{ .Values.image.tag | default .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end }}

{{- define "rl-scheduler.selectorLabels" -}}
app.kubernetes.io/name: {{ include "rl-scheduler.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{- define "rl-scheduler.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "rl-scheduler.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- default "default" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{- /* The trainer's own identity (never the scheduler's, never the namespace's default). */}}
{{- define "rl-scheduler.trainerServiceAccountName" -}}
{{- default (printf "%s-trainer" (include "rl-scheduler.fullname" .)) .Values.trainer.serviceAccount.name }}
{{- end }}

{{- /* Where a container finds its API token, as the kubelet's automount puts it. */}}
{{- define "rl-scheduler.tokenPath" -}}
/var/run/secrets/kubernetes.io/serviceaccount
{{- end }}

{{- define "rl-scheduler.image" -}}
{{- printf "%s:%s" .Values.image.repository (.Values.image.tag | default .Chart.AppVersion) }}
{{- end }}

{{- define "rl-scheduler.trainerImage" -}}
{{- printf "%s:%s" .Values.trainer.image.repository (.Values.trainer.image.tag | default .Chart.AppVersion) }}
{{- end }}

{{/* Where metrics.tls.secretName is mounted (tls.crt, tls.key), in both containers. */}}
{{- define "rl-scheduler.tlsPath" -}}/etc/rl-scheduler/tls{{- end }}

{{/* The shared volume's mount point, in both containers. */}}
{{- define "rl-scheduler.sharedPath" -}}/var/lib/rl-scheduler{{- end }}

{{/* "true" when the trainer publishes policy versions as custom resources (trainer.policyStore crd), else empty. */}}
{{- define "rl-scheduler.policyVersionsInApi" -}}
{{- if and .Values.trainer.enabled (eq (.Values.trainer.policyStore | default "crd") "crd") (not .Values.settings.policy_store) }}true{{- end }}
{{- end }}

{{/* The PolicyChannel's name: trainer.policyChannel, else schedulerName. */}}
{{- define "rl-scheduler.policyChannel" -}}
{{- .Values.trainer.policyChannel | default .Values.schedulerName }}
{{- end }}

{{/* The operator's settings file: the user's settings, then what the chart owns. */}}
{{- define "rl-scheduler.settings" -}}
{{- $settings := deepCopy .Values.settings }}
{{- if .Values.trainer.enabled }}
{{- /* The scheduler logs decisions where the trainer reads them, and loads the version
the trainer marks current in its policy store (the shipped policy until there is one). */}}
{{- $shared := include "rl-scheduler.sharedPath" . }}
{{- if and (include "rl-scheduler.policyVersionsInApi" .) (not $settings.policy_store) }}
{{- /* Policy versions as custom resources in the release namespace, the current one
kept (verified) in a cache folder on the shared volume. */}}
{{- $_ := set $settings "policy_versions" (dict
  "namespace" .Release.Namespace
  "channel" (include "rl-scheduler.policyChannel" .)
  "cache_dir" (printf "%s/policy-cache" $shared)) }}
{{- else if not $settings.policy_store }}
{{- $_ := set $settings "policy_store" (printf "%s/policies" $shared) }}
{{- end }}
{{- if not $settings.experience_dir }}
{{- $_ := set $settings "experience_dir" (printf "%s/experience" $shared) }}
{{- end }}
{{- end }}
{{- range $key := list "checkpoint" "policy_store" "experience_dir" }}
{{- if not (get $settings $key) }}
{{- $_ := unset $settings $key }}
{{- end }}
{{- end }}
{{- $lease := .Values.leaderElection }}
{{- if not (and (lt (int $lease.retryPeriodSeconds) (int $lease.renewDeadlineSeconds)) (lt (int $lease.renewDeadlineSeconds) (int $lease.leaseDurationSeconds))) }}
{{- fail (printf "leaderElection: need retryPeriodSeconds < renewDeadlineSeconds < leaseDurationSeconds, got %v / %v / %v" $lease.retryPeriodSeconds $lease.renewDeadlineSeconds $lease.leaseDurationSeconds) }}
{{- end }}
{{- $_ := set $settings "scheduler_name" .Values.schedulerName }}
{{- $_ := set $settings "metrics_address" (printf "0.0.0.0:%d" (int .Values.metrics.port)) }}
{{- if .Values.metrics.tls.secretName }}
{{- $serving := deepCopy ($settings.serving | default dict) }}
{{- $_ := set $serving "tls_cert_file" (printf "%s/tls.crt" (include "rl-scheduler.tlsPath" .)) }}
{{- $_ := set $serving "tls_key_file" (printf "%s/tls.key" (include "rl-scheduler.tlsPath" .)) }}
{{- $_ := set $settings "serving" $serving }}
{{- end }}
{{- $_ := set $settings "leader_election" (dict
  "enabled" .Values.leaderElection.enabled
  "name" .Values.schedulerName
  "namespace" .Release.Namespace
  "lease_duration_s" .Values.leaderElection.leaseDurationSeconds
  "renew_deadline_s" .Values.leaderElection.renewDeadlineSeconds
  "retry_period_s" .Values.leaderElection.retryPeriodSeconds) }}
{{- toYaml $settings }}
{{- end }}

{{/* Environment of both containers. */}}
{{- define "rl-scheduler.env" -}}
# The Lease lives in the pod's own namespace, where the Role lets us write it.
- name: RL_SCHEDULER_LEADER_ELECTION__NAMESPACE
  valueFrom:
    fieldRef:
      fieldPath: metadata.namespace
# Writable places under a read-only root filesystem (matplotlib and torch cache there).
- name: HOME
  value: /tmp
- name: MPLCONFIGDIR
  value: /tmp/matplotlib
- name: XDG_CACHE_HOME
  value: /tmp/.cache
{{- end }}

{{- define "rl-scheduler.volumeMounts" -}}
- name: settings
  mountPath: /etc/rl-scheduler
  readOnly: true
- name: tmp
  mountPath: /tmp
- name: shared
  mountPath: {{ include "rl-scheduler.sharedPath" . }}
{{- end }}
