{{/*
Names. The full name is the release name, with the chart's name appended
when the release name does not contain it; both are cut to 63 characters,
the limit of a DNS label, which a Service name must be.
*/}}
{{- define "kmirror.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "kmirror.fullname" -}}
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

{{- define "kmirror.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/*
Labels on every object. The selector labels are the subset that never
changes across upgrades: a Deployment's selector is immutable.
*/}}
{{- define "kmirror.labels" -}}
helm.sh/chart: {{ include "kmirror.chart" . }}
{{ include "kmirror.selectorLabels" . }}
app.kubernetes.io/version: {{ .Values.image.tag | default .Chart.AppVersion | trunc 63 | trimSuffix "-" | quote }}
app.kubernetes.io/component: server
app.kubernetes.io/part-of: kmirror
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end }}

{{- define "kmirror.selectorLabels" -}}
app.kubernetes.io/name: {{ include "kmirror.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{- define "kmirror.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "kmirror.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- default "default" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{- define "kmirror.image" -}}
{{- printf "%s:%s" .Values.image.repository (.Values.image.tag | default .Chart.AppVersion | toString) }}
{{- end }}

{{/*
The Secrets the server reads. Each is the chart's own (<fullname>-<suffix>)
unless existingSecret names another. The chart writes it only when its value
is given in the values; otherwise it must exist before the pods start.
*/}}
{{- define "kmirror.databaseSecretName" -}}
{{- if .Values.database.url }}
{{- printf "%s-database" (include "kmirror.fullname" .) }}
{{- else }}
{{- .Values.database.existingSecret | default (printf "%s-database" (include "kmirror.fullname" .)) }}
{{- end }}
{{- end }}

{{- define "kmirror.apiTokensSecretName" -}}
{{- if .Values.apiTokens.tokensFile }}
{{- printf "%s-api-tokens" (include "kmirror.fullname" .) }}
{{- else }}
{{- .Values.apiTokens.existingSecret | default (printf "%s-api-tokens" (include "kmirror.fullname" .)) }}
{{- end }}
{{- end }}

{{- define "kmirror.secretKeySecretName" -}}
{{- if .Values.secretKey.value }}
{{- printf "%s-secret-key" (include "kmirror.fullname" .) }}
{{- else }}
{{- .Values.secretKey.existingSecret | default (printf "%s-secret-key" (include "kmirror.fullname" .)) }}
{{- end }}
{{- end }}

{{/*
Where the Secrets are mounted. Each file is named after its key in the
Secret. Whole directories, never subPath: the kubelet then updates the files
when the Secret changes, and the server re-reads its secret key file when it
changes (the tokens file and the destination's and its Schema Registry's TLS
files are read at start).
*/}}
{{- define "kmirror.apiTokensDir" -}}/etc/kmirror/api-tokens{{- end }}
{{- define "kmirror.secretKeyDir" -}}/var/lib/kmirror{{- end }}
{{- define "kmirror.destinationTLSDir" -}}/etc/kmirror/destination-tls{{- end }}
{{- define "kmirror.destinationRegistryTLSDir" -}}/etc/kmirror/destination-schema-registry-tls{{- end }}

{{/*
Checks of the values that Kubernetes would accept but that would break
kmirror, run by the Deployment's template so that a bad value fails
`helm install` instead of a pod.
*/}}
{{- define "kmirror.validate" -}}
{{- $grace := int .Values.terminationGracePeriodSeconds }}
{{- $stop := add (int .Values.shutdown.preStopSleepSeconds) (int .Values.shutdown.timeoutSeconds) 1 }}
{{- if le $grace $stop }}
{{- fail (printf "terminationGracePeriodSeconds (%d) must exceed shutdown.preStopSleepSeconds + shutdown.timeoutSeconds + 1 s (%d): the server exits at the latest 1 s after its shutdown timeout, and the kubelet kills it at the end of the grace period, which starts with the preStop sleep" $grace $stop) }}
{{- end }}
{{- if lt (int .Values.shutdown.timeoutSeconds) 1 }}
{{- fail "shutdown.timeoutSeconds must be at least 1" }}
{{- end }}
{{- range $name, $_ := .Values.config }}
{{- if not (regexMatch "^KMIRROR_[A-Z0-9_]+$" $name) }}
{{- fail (printf "config.%s: keys are the server's KMIRROR_* environment variables (kmirror server --help names each flag's); use extraEnv for others" $name) }}
{{- end }}
{{- if has $name (list "KMIRROR_LISTEN" "KMIRROR_INSTANCE_ID" "KMIRROR_DATABASE_URL" "KMIRROR_LEASE_TTL" "KMIRROR_LEASE_RENEW_INTERVAL" "KMIRROR_LEASE_OUTAGE_GRACE" "KMIRROR_LOG_LEVEL" "KMIRROR_SHUTDOWN_TIMEOUT" "KMIRROR_API_TOKENS_FILE" "KMIRROR_SECRET_KEY_FILE" "KMIRROR_PUBLIC_METRICS") }}
{{- fail (printf "config.%s is set by the chart from its own value (see values.yaml)" $name) }}
{{- end }}
{{- if hasPrefix "KMIRROR_DESTINATION_" $name }}
{{- fail (printf "config.%s: the destination is configured under destination" $name) }}
{{- end }}
{{- if has $name (list "KMIRROR_API_TOKEN" "KMIRROR_API_READ_TOKEN") }}
{{- fail (printf "config.%s: config values are written into the Deployment in clear; put API tokens in the tokens file (apiTokens)" $name) }}
{{- end }}
{{- if has $name (list "KMIRROR_TLS_CERT_FILE" "KMIRROR_TLS_KEY_FILE") }}
{{- fail (printf "config.%s: the chart serves the API over plain HTTP inside the cluster (probes, Service and ServiceMonitor assume it); terminate TLS at the Ingress" $name) }}
{{- end }}
{{- end }}
{{- if .Values.secretKey.value }}
{{- range $line := splitList "\n" (trim .Values.secretKey.value) }}
{{- if not (regexMatch "^[0-9a-fA-F]{64}$" (trim $line)) }}
{{- fail "secretKey.value: each line must be a key of 64 hex digits, as kmirror secrets new-key prints it" }}
{{- end }}
{{- end }}
{{- end }}
{{- if and .Values.serviceMonitor.enabled (not .Values.metrics.public) (not .Values.serviceMonitor.bearerTokenSecret.name) }}
{{- fail "serviceMonitor: /metrics needs a token unless metrics.public is true; set serviceMonitor.bearerTokenSecret.name and .key (a Secret holding a viewer token) or metrics.public" }}
{{- end }}
{{- if and .Values.destination.sasl.mechanism (not (hasPrefix "SASL_" .Values.destination.securityProtocol)) }}
{{- fail (printf "destination.sasl.mechanism needs destination.securityProtocol SASL_SSL or SASL_PLAINTEXT, not %s" .Values.destination.securityProtocol) }}
{{- end }}
{{- with .Values.destination.sasl }}
{{- if and .mechanism (not (has .mechanism (list "PLAIN" "SCRAM-SHA-256" "SCRAM-SHA-512" "AWS_MSK_IAM" "OAUTHBEARER"))) }}
{{- fail (printf "destination.sasl.mechanism: %s is not PLAIN, SCRAM-SHA-256, SCRAM-SHA-512, AWS_MSK_IAM or OAUTHBEARER" .mechanism) }}
{{- end }}
{{- if eq .mechanism "OAUTHBEARER" }}
{{- if not (hasPrefix "https://" .oauthbearer.tokenEndpointUrl) }}
{{- fail "destination.sasl.oauthbearer.tokenEndpointUrl: the identity provider's https token endpoint is required with OAUTHBEARER" }}
{{- end }}
{{- if not .oauthbearer.clientId }}
{{- fail "destination.sasl.oauthbearer.clientId is required with OAUTHBEARER" }}
{{- end }}
{{- if not .existingSecret }}
{{- fail "destination.sasl.existingSecret: name the Secret that holds the OAuth client secret (under oauthbearer.clientSecretKey)" }}
{{- end }}
{{- else if eq .mechanism "AWS_MSK_IAM" }}
{{- if and .aws.accessKeyId (not .existingSecret) }}
{{- fail "destination.sasl.existingSecret: name the Secret that holds the AWS secret access key (under aws.secretAccessKeyKey), or leave aws.accessKeyId empty to use the pod's AWS identity" }}
{{- end }}
{{- else if and .mechanism (not .existingSecret) }}
{{- fail "destination.sasl.existingSecret: name the Secret that holds the destination's SASL password" }}
{{- end }}
{{- end }}
{{- with .Values.destination.schemaRegistry }}
{{- if .url }}
{{- range $u := splitList "," .url }}
{{- if not (regexMatch "^https?://[^/@]+(/.*)?$" (trim $u)) }}
{{- fail (printf "destination.schemaRegistry.url: %q is not an http:// or https:// URL with a host (and without credentials: use username and existingSecret)" (trim $u)) }}
{{- end }}
{{- end }}
{{- if and .username .bearerTokenKey }}
{{- fail "destination.schemaRegistry: username and bearerTokenKey are both set; a registry takes basic auth or a bearer token, not both" }}
{{- end }}
{{- if and (or .username .bearerTokenKey) (not .existingSecret) }}
{{- fail "destination.schemaRegistry.existingSecret: name the Secret that holds the registry's password (under passwordKey) or bearer token (under bearerTokenKey)" }}
{{- end }}
{{- if and (or .tls.existingSecret .tls.serverName) (not (contains "https://" .url)) }}
{{- fail "destination.schemaRegistry.tls: set, but no url is https://" }}
{{- end }}
{{- if and .tls.existingSecret (ne (empty .tls.certKey) (empty .tls.keyKey)) }}
{{- fail "destination.schemaRegistry.tls: certKey and keyKey go together" }}
{{- end }}
{{- else if or .username .existingSecret .bearerTokenKey .tls.existingSecret .tls.serverName }}
{{- fail "destination.schemaRegistry: credentials or TLS are set, but no url" }}
{{- end }}
{{- end }}
{{- end }}
