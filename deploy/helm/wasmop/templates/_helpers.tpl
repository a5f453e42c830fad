{{/* The chart's name, for the app.kubernetes.io/name label. */}}
{{- define "wasmop.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/*
The full name of the release's objects: the release name, with the chart's name appended unless
it is already in it ("wasmop" for a release named wasmop, as `kubectl apply -k deploy/` names
them).
*/}}
{{- define "wasmop.fullname" -}}
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

{{/* The labels that select the release's pods. */}}
{{- define "wasmop.selectorLabels" -}}
app.kubernetes.io/name: {{ include "wasmop.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{/* The labels of every object. */}}
{{- define "wasmop.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{ include "wasmop.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end }}

{{/* The ServiceAccount the host runs as. */}}
{{- define "wasmop.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "wasmop.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- required "serviceAccount.name is required when serviceAccount.create is false" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{/* The Lease the replicas elect a leader on. */}}
{{- define "wasmop.leaseName" -}}
{{- default (printf "%s-leader" (include "wasmop.fullname" .)) .Values.leaderElection.leaseName }}
{{- end }}

{{/* The Secret of the webhook endpoint's certificates. */}}
{{- define "wasmop.webhookSecret" -}}
{{- default (printf "%s-webhook-certs" (include "wasmop.fullname" .)) .Values.webhook.certificates.secretName }}
{{- end }}

{{/* Where the webhook certificates of mode files are mounted. */}}
{{- define "wasmop.webhookCertDir" -}}
/var/run/wasmop/webhook-certs
{{- end }}

{{/* The shard group of the replicas. */}}
{{- define "wasmop.shardGroup" -}}
{{- default (include "wasmop.fullname" .) .Values.sharding.group }}
{{- end }}

{{/*
The registry credentials the chart's ReconcilerPlugins name, as a JSON object: namespace to the
sorted list of Secret names (a Secret without a namespace is the release's).
*/}}
{{- define "wasmop.pullSecrets" -}}
{{- $byNamespace := dict }}
{{- range .Values.plugins }}
{{- range .imagePullSecrets }}
{{- $namespace := default $.Release.Namespace .namespace }}
{{- $names := get $byNamespace $namespace | default list }}
{{- $_ := set $byNamespace $namespace (append $names .name | uniq | sortAlpha) }}
{{- end }}
{{- end }}
{{- toJson $byNamespace }}
{{- end }}

{{/* Fails on values that cannot run. */}}
{{- define "wasmop.validate" -}}
{{- if and (gt (int .Values.replicaCount) 1) (not .Values.leaderElection.enabled) (not .Values.sharding.enabled) }}
{{- fail "replicaCount > 1 needs leaderElection.enabled or sharding.enabled: replicas without either would all reconcile the same objects" }}
{{- end }}
{{- if not (has .Values.sharding.filter (list "auto" "client")) }}
{{- fail "sharding.filter is auto or client" }}
{{- end }}
{{- if and (not .Values.reconcilerPlugins.enabled) (not .Values.pluginFiles.volume) }}
{{- fail "nothing to run: enable reconcilerPlugins or give pluginFiles.volume" }}
{{- end }}
{{- if and .Values.plugins (not .Values.reconcilerPlugins.enabled) }}
{{- fail "plugins are ReconcilerPlugin resources: they need reconcilerPlugins.enabled" }}
{{- end }}
{{- if and .Values.webhook.enabled (not (has .Values.webhook.certificates.mode (list "managed" "files"))) }}
{{- fail "webhook.certificates.mode is managed or files" }}
{{- end }}
{{- if and .Values.webhook.enabled (eq .Values.webhook.certificates.mode "files") (not .Values.webhook.certificates.secretName) }}
{{- fail "webhook.certificates.mode files serves the certificates of an existing Secret: give webhook.certificates.secretName" }}
{{- end }}
{{- if and .Values.metrics.serviceMonitor.enabled (not .Values.metrics.service.enabled) }}
{{- fail "metrics.serviceMonitor scrapes the metrics Service: it needs metrics.service.enabled" }}
{{- end }}
{{- end }}
