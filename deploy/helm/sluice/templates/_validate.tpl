{{/*
The checks a JSON schema cannot express. Each failure names the value, what
it is and the rule, so `helm install` stops with a reason before anything
reaches the cluster. Included once, from templates/driver-deployment.yaml.
*/}}
{{- define "sluice.validate" -}}
{{- $v := .Values -}}

{{- /* Queries: production guards, and no secret in a ConfigMap. */ -}}
{{- range $key, $q := $v.queries }}
{{- $q = default dict $q }}
{{- $cp := toString (default "" $q.checkpointLocation) }}
{{- if eq (toString (default "lab" $q.environment)) "production" }}
{{- if not (hasPrefix "s3://" $cp) }}
{{- fail (printf "queries.%s.checkpointLocation: %q is not on the object store; a production query's checkpoint must be an s3:// URI (a pod's disk is lost when the pod moves, and with it every committed offset)" $key $cp) }}
{{- end }}
{{- $sink := dig "sink" "parquet" "path" "" $q | toString }}
{{- if and $sink (not (hasPrefix "s3://" $sink)) }}
{{- fail (printf "queries.%s.sink.parquet.path: %q is not on the object store; a production query's output must be an s3:// URI" $key $sink) }}
{{- end }}
{{- end }}
{{- /* Any query: executors write state and output files in other pods than the driver's. */ -}}
{{- if not (hasPrefix "s3://" $cp) }}
{{- fail (printf "queries.%s.checkpointLocation: %q is not an s3:// URI; the driver and the executors run in different pods and share the checkpoint only through the object store" $key $cp) }}
{{- end }}
{{- $psink := dig "sink" "parquet" "path" "" $q | toString }}
{{- if and $psink (not (hasPrefix "s3://" $psink)) }}
{{- fail (printf "queries.%s.sink.parquet.path: %q is not an s3:// URI; executors in other pods write the output files" $key $psink) }}
{{- end }}
{{- $kafka := dig "source" "kafka" dict $q }}
{{- $opts := merge (dict) (default dict $kafka.options) $kafka }}
{{- range $opt, $_ := $opts }}
{{- $lo := lower $opt }}
{{- range $word := list "password" "jaas" "secret" "key" "token" "credential" }}
{{- if and (hasPrefix "kafka." $lo) (contains $word $lo) }}
{{- fail (printf "queries.%s.source.kafka: option %q is a secret and queries are rendered into a ConfigMap; put this query in a Secret of your own and name it in queriesExistingSecret" $key $opt) }}
{{- end }}
{{- end }}
{{- end }}
{{- end }}

{{- /* Registry on the object store: a pod's disk does not outlive the pod. */ -}}
{{- if not (hasPrefix "s3://" $v.registry.uri) }}
{{- fail (printf "registry.uri: %q is not an s3:// URI; the registry holds the queries and the driver lease and must outlive the driver pod" $v.registry.uri) }}
{{- end }}

{{- /* Executor drain: the grace period must cover the pause and the drain. */ -}}
{{- $need := add $v.executor.preStopSleepSeconds $v.executor.drainTimeoutSeconds }}
{{- if lt (int $v.executor.terminationGracePeriodSeconds) (int $need) }}
{{- fail (printf "executor.terminationGracePeriodSeconds: %v is shorter than executor.preStopSleepSeconds + executor.drainTimeoutSeconds = %v; the kubelet would kill a draining executor mid-task" $v.executor.terminationGracePeriodSeconds $need) }}
{{- end }}

{{- /* Driver stop: the batch in flight must be able to commit before the kubelet kills the pod. */ -}}
{{- if le (int $v.driver.terminationGracePeriodSeconds) (int $v.driver.stopTimeoutSeconds) }}
{{- fail (printf "driver.terminationGracePeriodSeconds: %v is not above driver.stopTimeoutSeconds %v; the kubelet would kill the driver while its last batch commits" $v.driver.terminationGracePeriodSeconds $v.driver.stopTimeoutSeconds) }}
{{- end }}

{{- /* PodDisruptionBudget: one of the two, and never one that blocks every drain. */ -}}
{{- if $v.executor.pdb.enabled }}
{{- $min := $v.executor.pdb.minAvailable }}
{{- $max := $v.executor.pdb.maxUnavailable }}
{{- if and (not (kindIs "invalid" $min)) (not (kindIs "invalid" $max)) }}
{{- fail "executor.pdb: set either minAvailable or maxUnavailable, not both (set maxUnavailable: null to use minAvailable)" }}
{{- end }}
{{- if and (kindIs "invalid" $min) (kindIs "invalid" $max) }}
{{- fail "executor.pdb: set minAvailable or maxUnavailable (maxUnavailable: 1 lets a drain evict one executor at a time)" }}
{{- end }}
{{- if not (kindIs "invalid" $min) }}
{{- $replicas := int (ternary $v.executor.autoscaling.minReplicas $v.executor.replicas $v.executor.autoscaling.enabled) }}
{{- $blocks := false }}
{{- if kindIs "string" $min }}
{{- $pct := int (trimSuffix "%" $min) }}
{{- /* ceil(replicas*pct/100) >= replicas */ -}}
{{- if ge (int (div (add (mul $replicas $pct) 99) 100)) $replicas }}{{ $blocks = true }}{{ end }}
{{- else if ge (int $min) $replicas }}{{ $blocks = true }}
{{- end }}
{{- if $blocks }}
{{- fail (printf "executor.pdb.minAvailable: %v with %d executor replica(s) leaves no executor that may be evicted, so every node drain would block; lower it below the replica count or use maxUnavailable: 1" $min $replicas) }}
{{- end }}
{{- end }}
{{- end }}

{{- /* Autoscaling bounds. */ -}}
{{- if and $v.executor.autoscaling.enabled (gt (int $v.executor.autoscaling.minReplicas) (int $v.executor.autoscaling.maxReplicas)) }}
{{- fail (printf "executor.autoscaling: minReplicas %v is above maxReplicas %v" $v.executor.autoscaling.minReplicas $v.executor.autoscaling.maxReplicas) }}
{{- end }}

{{- /* TLS needs a source. */ -}}
{{- if and $v.tls.enabled (not $v.tls.existingSecret) (not $v.tls.certManager.enabled) }}
{{- fail "tls.enabled: needs tls.existingSecret (tls.crt, tls.key, ca.crt) or tls.certManager.enabled" }}
{{- end }}
{{- if and $v.tls.enabled $v.tls.certManager.enabled (not $v.tls.existingSecret) }}
{{- if not (.Capabilities.APIVersions.Has "cert-manager.io/v1/Certificate") }}
{{- fail "tls.certManager.enabled: the cluster has no cert-manager.io/v1 Certificate CRD; install cert-manager or give tls.existingSecret" }}
{{- end }}
{{- if not $v.tls.certManager.issuerRef.name }}
{{- fail "tls.certManager.issuerRef.name: required when tls.certManager.enabled" }}
{{- end }}
{{- end }}

{{- /* Roles: certificate roles need mutual TLS; the chart's own clients need a viewer token. */ -}}
{{- $roles := include "sluice.rolesEnabled" . }}
{{- if $v.roles.principalRoles }}
{{- if not $v.tls.enabled }}
{{- fail "roles.principalRoles: maps client certificates to roles, which needs mutual TLS: set tls.enabled with a certificate Secret holding ca.crt (the driver refuses --principal-role without a CA)" }}
{{- end }}
{{- /* An existing Secret can be read at install and upgrade (not under `helm template`). */ -}}
{{- with $v.tls.existingSecret }}
{{- with (lookup "v1" "Secret" $.Release.Namespace .) }}
{{- if not (hasKey (default dict .data) "ca.crt") }}
{{- fail (printf "roles.principalRoles: needs mutual TLS, but the Secret %s (tls.existingSecret) holds no ca.crt, so no client certificate is verified and none can name a principal" .metadata.name) }}
{{- end }}
{{- end }}
{{- end }}
{{- end }}
{{- $monitor := and $v.metrics.serviceMonitor.enabled (.Capabilities.APIVersions.Has "monitoring.coreos.com/v1/ServiceMonitor") }}
{{- $tokenFiles := or $v.roles.viewerTokens.existingSecret $v.roles.operatorTokens.existingSecret }}
{{- if and $roles (not $v.roles.clientToken.existingSecret) }}
{{- if $v.tests.enabled }}
{{- fail "roles.clientToken.existingSecret: required with roles on (roles.viewerTokens, roles.operatorTokens or roles.principalRoles) and tests.enabled: the driver then refuses the cluster token on the CLI's service, so `helm test` needs a Secret key holding one token of roles.viewerTokens' file (the bare token); with certificate roles alone add roles.viewerTokens, or set tests.enabled: false" }}
{{- end }}
{{- if $monitor }}
{{- fail "roles.clientToken.existingSecret: required with roles on and metrics.serviceMonitor.enabled: the driver's /metrics then answers 401 without a viewer credential, so Prometheus needs a Secret key holding one token of roles.viewerTokens' file (the bare token)" }}
{{- end }}
{{- end }}
{{- if and $v.roles.clientToken.existingSecret (not $tokenFiles) }}
{{- fail "roles.clientToken.existingSecret: set, but neither roles.viewerTokens nor roles.operatorTokens is: the client token must be a token of one of their files (without roles `helm test` presents the cluster token; with certificate roles alone there is no token to present)" }}
{{- end }}

{{- /* Policy: without lab, the driver accepts only URIs as prefixes (it would refuse to start). */ -}}
{{- with $v.policy }}
{{- $lab := dig "lab" false . }}
{{- $lists := list (list "policy.allow" (default dict .allow)) }}
{{- range $name, $l := (default dict .principals) }}
{{- $lists = append $lists (list (printf "policy.principals.%s" $name) (default dict $l)) }}
{{- end }}
{{- range $entry := $lists }}
{{- $where := index $entry 0 }}
{{- $l := index $entry 1 }}
{{- range $kind := list "sources" "sinks" "checkpoints" "badRecords" }}
{{- range $pre := (get $l $kind | default (list)) }}
{{- /* as the driver's policy.isURI: a scheme before the first "://", not file */ -}}
{{- $scheme := "" }}
{{- if contains "://" (toString $pre) }}{{ $scheme = index (splitn "://" 2 (toString $pre)) "_0" }}{{ end }}
{{- if and (not $lab) (or (eq $scheme "") (eq $scheme "file")) }}
{{- fail (printf "%s.%s: %q is a local path: the driver's policy allows local paths only with policy.lab: true (use an s3:// prefix; the driver and executors run in different pods)" $where $kind $pre) }}
{{- end }}
{{- end }}
{{- end }}
{{- end }}
{{- end }}
{{- end -}}
