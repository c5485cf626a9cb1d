{{/* Names */}}
{{- define "sluice.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "sluice.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- $name := default .Chart.Name .Values.nameOverride -}}
{{- if contains $name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{/* The driver's Service: executors and the CLI dial it by this name. */}}
{{- define "sluice.driver.fullname" -}}
{{- printf "%s-driver" (include "sluice.fullname" .) | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "sluice.executor.fullname" -}}
{{- printf "%s-executor" (include "sluice.fullname" .) | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- /*
The DNS name every executor's certificate carries and the driver and
executors verify when they dial an executor at its pod IP (--tls-peer-name):
the executors' Service name unless tls.peerName says otherwise.
*/ -}}
{{- define "sluice.tlsPeerName" -}}
{{- default (printf "%s.%s.svc" (include "sluice.executor.fullname" .) .Release.Namespace) .Values.tls.peerName -}}
{{- end -}}

{{- define "sluice.driver.address" -}}
{{- printf "%s.%s.svc:%v" (include "sluice.driver.fullname" .) .Release.Namespace .Values.driver.ports.grpc -}}
{{- end -}}

{{- define "sluice.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "sluice.fullname" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- default "default" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{- define "sluice.tokenSecretName" -}}
{{- default (printf "%s-token" (include "sluice.fullname" .)) .Values.auth.existingSecret -}}
{{- end -}}

{{- define "sluice.tokenSecretKey" -}}
{{- if .Values.auth.existingSecret -}}{{ .Values.auth.existingSecretKey }}{{- else -}}token{{- end -}}
{{- end -}}

{{- define "sluice.tlsSecretName" -}}
{{- default (printf "%s-tls" (include "sluice.fullname" .)) .Values.tls.existingSecret -}}
{{- end -}}

{{- /*
Roles are on once any role credential is configured: the driver then
refuses the cluster token on the CLI's service, so the chart's own clients
(the helm test pod, the driver's ServiceMonitor) present
roles.clientToken instead. "true" or "".
*/ -}}
{{- define "sluice.rolesEnabled" -}}
{{- $r := .Values.roles -}}
{{- if or $r.viewerTokens.existingSecret $r.operatorTokens.existingSecret $r.principalRoles -}}true{{- end -}}
{{- end -}}

{{- define "sluice.policyConfigMapName" -}}
{{- printf "%s-policy" (include "sluice.fullname" .) | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* Labels */}}
{{- define "sluice.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
app.kubernetes.io/name: {{ include "sluice.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Values.image.tag | default .Chart.AppVersion | trunc 63 | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: sluice
{{- with .Values.commonLabels }}
{{ toYaml . }}
{{- end }}
{{- end -}}

{{/* sluice.selectorLabels takes (list $ "driver"|"executor"). */}}
{{- define "sluice.selectorLabels" -}}
{{- $ := index . 0 -}}
app.kubernetes.io/name: {{ include "sluice.name" $ }}
app.kubernetes.io/instance: {{ $.Release.Name }}
app.kubernetes.io/component: {{ index . 1 }}
{{- end -}}

{{- define "sluice.componentLabels" -}}
{{- $ := index . 0 -}}
{{ include "sluice.labels" $ }}
app.kubernetes.io/component: {{ index . 1 }}
{{- end -}}

{{/* The image: registry/repository:tag, or @digest when a digest is set. */}}
{{- define "sluice.image" -}}
{{- $repo := .Values.image.repository -}}
{{- if .Values.image.registry -}}{{- $repo = printf "%s/%s" .Values.image.registry $repo -}}{{- end -}}
{{- if .Values.image.digest -}}
{{- printf "%s@%s" $repo .Values.image.digest -}}
{{- else -}}
{{- printf "%s:%s" $repo (.Values.image.tag | default .Chart.AppVersion) -}}
{{- end -}}
{{- end -}}

{{/* Restricted pod and container security contexts (Pod Security "restricted"). */}}
{{- define "sluice.podSecurityContext" -}}
{{- $base := dict "runAsNonRoot" true "runAsUser" 65532 "runAsGroup" 65532 "fsGroup" 65532 "seccompProfile" (dict "type" "RuntimeDefault") -}}
{{- toYaml (mustMergeOverwrite $base (deepCopy (default dict .))) -}}
{{- end -}}

{{- define "sluice.securityContext" -}}
{{- $base := dict "runAsNonRoot" true "allowPrivilegeEscalation" false "readOnlyRootFilesystem" true "privileged" false "capabilities" (dict "drop" (list "ALL")) "seccompProfile" (dict "type" "RuntimeDefault") -}}
{{- toYaml (mustMergeOverwrite $base (deepCopy (default dict .))) -}}
{{- end -}}

{{/* Flags every binary shares: object store, token, TLS. */}}
{{- define "sluice.commonArgs" -}}
{{- with .Values.objectStore.endpoint }}
- --s3-endpoint={{ . }}
{{- end }}
{{- with .Values.objectStore.region }}
- --s3-region={{ . }}
{{- end }}
{{- if kindIs "bool" .Values.objectStore.pathStyle }}
- --s3-path-style={{ .Values.objectStore.pathStyle }}
{{- end }}
- --token-file=/var/run/sluice/token/token
{{- if .Values.tls.enabled }}
- --tls-dir=/var/run/sluice/tls
- --tls-peer-name={{ include "sluice.tlsPeerName" . }}
{{- end }}
{{- end -}}

{{/* Environment every container shares: S3 credentials from a Secret, never inline. */}}
{{- define "sluice.commonEnv" -}}
{{- with .Values.objectStore.credentials.existingSecret }}
- name: AWS_ACCESS_KEY_ID
  valueFrom:
    secretKeyRef: {name: {{ . | quote }}, key: {{ $.Values.objectStore.credentials.accessKeyIDKey | quote }}}
- name: AWS_SECRET_ACCESS_KEY
  valueFrom:
    secretKeyRef: {name: {{ . | quote }}, key: {{ $.Values.objectStore.credentials.secretAccessKeyKey | quote }}}
{{- end }}
{{- end -}}

{{/* Volumes every pod shares: the cluster token, TLS, a writable /tmp. */}}
{{- define "sluice.commonVolumes" -}}
- name: token
  secret:
    secretName: {{ include "sluice.tokenSecretName" . }}
    defaultMode: 0440
    items:
      - {key: {{ include "sluice.tokenSecretKey" . | quote }}, path: token}
{{- include "sluice.tlsTmpVolumes" . }}
{{- end -}}

{{- define "sluice.commonVolumeMounts" -}}
- {name: token, mountPath: /var/run/sluice/token, readOnly: true}
{{- include "sluice.tlsTmpVolumeMounts" . }}
{{- end -}}

{{/* TLS and /tmp alone: for the helm test pod, which with roles on presents roles.clientToken, not the cluster token. */}}
{{- define "sluice.tlsTmpVolumes" -}}
{{- if .Values.tls.enabled }}
- name: tls
  secret:
    secretName: {{ include "sluice.tlsSecretName" . }}
    defaultMode: 0440
{{- end }}
- name: tmp
  emptyDir:
    sizeLimit: 256Mi
{{- end -}}

{{- define "sluice.tlsTmpVolumeMounts" -}}
{{- if .Values.tls.enabled }}
- {name: tls, mountPath: /var/run/sluice/tls, readOnly: true}
{{- end }}
- {name: tmp, mountPath: /tmp}
{{- end -}}

{{/* A checksum of what the pods read from objects the chart renders, so a change rolls them. */}}
{{- define "sluice.configChecksums" -}}
checksum/token: {{ include (print $.Template.BasePath "/token-secret.yaml") . | sha256sum }}
{{- end -}}

{{/*
sluice.probe takes (list $ probe). With TLS on, the HTTP port requires a
client certificate whenever the Secret holds ca.crt (mutual TLS), which the
kubelet's probes cannot present: an httpGet probe on port "http" moves to
port "health" (--health-addr: /healthz and /readyz in plaintext), keeping
its path and timings.
*/}}
{{- define "sluice.probe" -}}
{{- $ := index . 0 -}}
{{- $p := deepCopy (index . 1) -}}
{{- if and $.Values.tls.enabled $p.httpGet -}}
{{- if eq (toString $p.httpGet.port) "http" -}}
{{- $_ := set $p.httpGet "port" "health" -}}
{{- end -}}
{{- end -}}
{{- toYaml $p -}}
{{- end -}}
