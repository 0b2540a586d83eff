{{/* Chart name, truncated to a DNS label. */}}
{{- define "inferscale.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* Full name: the release name, plus the chart name unless the release name contains it. */}}
{{- define "inferscale.fullname" -}}
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

{{- define "inferscale.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* Labels on every object. */}}
{{- define "inferscale.labels" -}}
helm.sh/chart: {{ include "inferscale.chart" . }}
app.kubernetes.io/name: {{ include "inferscale.name" . | quote }}
app.kubernetes.io/instance: {{ .Release.Name | quote }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: inferscale
{{- with .Values.commonLabels }}
{{ toYaml . }}
{{- end }}
{{- end }}

{{- define "inferscale.selectorLabels" -}}
app.kubernetes.io/name: {{ include "inferscale.name" . | quote }}
app.kubernetes.io/instance: {{ .Release.Name | quote }}
{{- end }}

{{/* Image reference from an image block; call with (dict "image" $img "root" $). */}}
{{- define "inferscale.image" -}}
{{- $img := .image }}
{{- if $img.digest }}
{{- printf "%s@%s" $img.repository $img.digest }}
{{- else }}
{{- printf "%s:%s" $img.repository (default .root.Chart.AppVersion $img.tag | toString) }}
{{- end }}
{{- end }}

{{/* ---------------- scaler ---------------- */}}

{{- define "inferscale.scaler.fullname" -}}
{{- printf "%s-scaler" (include "inferscale.fullname" .) | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "inferscale.scaler.selectorLabels" -}}
{{ include "inferscale.selectorLabels" . }}
app.kubernetes.io/component: scaler
{{- end }}

{{- define "inferscale.scaler.serviceAccountName" -}}
{{- if .Values.scaler.serviceAccount.create }}
{{- default (include "inferscale.scaler.fullname" .) .Values.scaler.serviceAccount.name }}
{{- else }}
{{- default "default" .Values.scaler.serviceAccount.name }}
{{- end }}
{{- end }}

{{/* The scaler's read rules: ScaledObjects (bounds, scale target), the scale targets
(ready replicas) and their pods (measured cold start: creation to Ready). A Role with
--watch-namespace, a ClusterRole with scaler.watchAllNamespaces. */}}
{{- define "inferscale.scaler.readRules" -}}
- apiGroups: ["keda.sh"]
  resources: ["scaledobjects"]
  verbs: ["get", "list", "watch"]
- apiGroups: ["apps"]
  resources: ["deployments", "statefulsets"]
  verbs: ["get", "list", "watch"]
- apiGroups: [""]
  resources: ["pods"]
  verbs: ["list", "watch"]
{{- end }}

{{/* Cluster-scoped names must be unique across namespaces: prefix the namespace. RBAC names
are path segments, not DNS labels, so the name is not cut at 63 characters: with a long
namespace that cut made the scaler's and the ledger's ClusterRoles (and those of every release
in the namespace) one name. */}}
{{- define "inferscale.scaler.clusterRoleName" -}}
{{- printf "%s-%s" .Release.Namespace (include "inferscale.scaler.fullname" .) }}
{{- end }}

{{/* host:port KEDA dials; the scaler's TLS certificate must name this host. */}}
{{- define "inferscale.scaler.address" -}}
{{- printf "%s.%s.svc:%d" (include "inferscale.scaler.fullname" .) .Release.Namespace (int .Values.scaler.config.grpcPort) }}
{{- end }}

{{- define "inferscale.scaler.prometheusAddress" -}}
{{- default .Values.prometheus.address .Values.scaler.config.prometheusAddress }}
{{- end }}

{{/* ---------------- addresses from Secrets ----------------
An address with a password or a token must not be a container argument (anyone who can read
the Deployments or the CronJob sees it): prometheus.addressSecret and
scaler.config.opencostAddressSecret give it to the container as an environment variable from
a Secret, which cmd/scaler, cmd/residency and cmd/ledger read when the flag is not given
(internal/envflag holds the names). */}}

{{/* An env entry from a Secret's key; call with (dict "env" <variable> "secret" <{name, key}>). */}}
{{- define "inferscale.secretEnv" -}}
- name: {{ .env }}
  valueFrom:
    secretKeyRef:
      name: {{ .secret.name | quote }}
      key: {{ .secret.key | quote }}
{{- end }}

{{/* $INFERSCALE_PROMETHEUS_ADDRESS from prometheus.addressSecret; call with the root context,
only for a container given no --prometheus-address. */}}
{{- define "inferscale.prometheusAddressEnv" -}}
{{- include "inferscale.secretEnv" (dict "env" "INFERSCALE_PROMETHEUS_ADDRESS" "secret" .Values.prometheus.addressSecret) }}
{{- end }}

{{/* $INFERSCALE_OPENCOST_ADDRESS from scaler.config.opencostAddressSecret; call with the root
context, only for a scaler given no --opencost-address. */}}
{{- define "inferscale.opencostAddressEnv" -}}
{{- include "inferscale.secretEnv" (dict "env" "INFERSCALE_OPENCOST_ADDRESS" "secret" .Values.scaler.config.opencostAddressSecret) }}
{{- end }}

{{/* The Secret names of prometheus.addressSecret and scaler.config.opencostAddressSecret, or
"" (off, or the value set to null). */}}
{{- define "inferscale.prometheusAddressSecretName" -}}
{{- dig "addressSecret" "name" "" .Values.prometheus }}
{{- end }}

{{- define "inferscale.opencostAddressSecretName" -}}
{{- dig "opencostAddressSecret" "name" "" .Values.scaler.config }}
{{- end }}

{{- define "inferscale.scaler.tlsSecretName" -}}
{{- default (printf "%s-tls" (include "inferscale.scaler.fullname" .)) .Values.scaler.tls.existingSecret }}
{{- end }}

{{- define "inferscale.scaler.clientTLSSecretName" -}}
{{- default (printf "%s-client-tls" (include "inferscale.scaler.fullname" .)) .Values.scaler.tls.existingClientSecret }}
{{- end }}

{{- define "inferscale.scaler.triggerAuthName" -}}
{{- printf "%s-tls" (include "inferscale.scaler.fullname" .) }}
{{- end }}

{{/* ---------------- pools ----------------
Pool helpers take (dict "root" $ "pool" $pool). */}}

{{- define "inferscale.pool.fullname" -}}
{{- printf "%s-%s" (include "inferscale.fullname" .root) .pool.name | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "inferscale.pool.selectorLabels" -}}
{{ include "inferscale.selectorLabels" .root }}
app.kubernetes.io/component: pool
inferscale.io/pool: {{ .pool.name | quote }}
{{- end }}

{{- define "inferscale.pool.serviceAccountName" -}}
{{- printf "%s-pool" (include "inferscale.fullname" .root) | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* The pool runs the residency sidecar: Triton pools unless residency.enabled is false. */}}
{{- define "inferscale.pool.hasSidecar" -}}
{{- $r := .pool.residency | default dict }}
{{- if and (eq (.pool.engine | default "triton") "triton") (ne (toString (index $r "enabled")) "false") }}true{{- end }}
{{- end }}

{{/* Regex (PromQL, fully anchored) matching the names of the pool's pods. */}}
{{- define "inferscale.pool.podRegex" -}}
{{- printf "%s-[a-z0-9]+-[a-z0-9]+" (include "inferscale.pool.fullname" .) }}
{{- end }}

{{/* Residency flags of the pool: residency.config merged with pools[].residency.config; YAML. */}}
{{- define "inferscale.pool.residencyConfig" -}}
{{- $r := .pool.residency | default dict }}
{{- toYaml (mergeOverwrite (deepCopy .root.Values.residency.config) (deepCopy (index $r "config" | default dict))) }}
{{- end }}

{{/* KEDA settings of the pool: keda merged with pools[].keda; YAML. */}}
{{- define "inferscale.pool.keda" -}}
{{- toYaml (mergeOverwrite (deepCopy .root.Values.keda) (deepCopy (.pool.keda | default dict))) }}
{{- end }}

{{/* Whether the pool's HPA tolerance 0 (keda.hpa.zeroTolerance) is in force, from the values
and the cluster's version (.Capabilities.KubeVersion; helm template uses --kube-version):
"off"  zeroTolerance is false;
"keda" kedaVersion is below 2.18, whose ScaledObject CRD has no tolerance field: the chart
       leaves the field out (the API server would prune it);
"kube" Kubernetes below 1.33: the HPA has no tolerance field and drops it;
"gate" Kubernetes 1.33-1.34: HPAConfigurableTolerance is alpha, off unless the cluster
       enables it;
"on"   Kubernetes 1.35 or newer (the gate is beta, on by default) and KEDA 2.18 or newer.
Call with (dict "root" $ "keda" <the pool's merged keda map>). */}}
{{- define "inferscale.pool.toleranceState" -}}
{{- $kube := .root.Capabilities.KubeVersion.Version }}
{{- $keda := .root.Values.kedaVersion | default "" | toString }}
{{- if not .keda.hpa.zeroTolerance }}off
{{- else if and $keda (semverCompare "<2.18.0-0" $keda) }}keda
{{- else if semverCompare "<1.33.0-0" $kube }}kube
{{- else if semverCompare "<1.35.0-0" $kube }}gate
{{- else }}on
{{- end }}
{{- end }}

{{/* Scaler metadata of the pool: scaling merged with pools[].scaling; engine and model from the
pool unless the pool's scaling names them; YAML. */}}
{{- define "inferscale.pool.scaling" -}}
{{- $s := mergeOverwrite (deepCopy .root.Values.scaling) (deepCopy (.pool.scaling | default dict)) }}
{{- if not (hasKey $s "engine") }}
{{- $_ := set $s "engine" (.pool.engine | default "triton") }}
{{- end }}
{{- if and (not (hasKey $s "model")) .pool.model }}
{{- $_ := set $s "model" .pool.model }}
{{- end }}
{{- toYaml $s }}
{{- end }}

{{/* One metadata value as KEDA wants it: a string. Whole floats print without exponent or
decimals (10737418240, not 1.073741824e+10). */}}
{{- define "inferscale.metaValue" -}}
{{- if kindIs "float64" . }}
{{- if eq (floor .) . }}{{ printf "%d" (int64 .) }}{{ else }}{{ toString . }}{{ end }}
{{- else if or (kindIs "int" .) (kindIs "int64" .) }}
{{- printf "%d" (int64 .) }}
{{- else }}
{{- toString . }}
{{- end }}
{{- end }}

{{/* Extended resource name of the pool's GPU: gpuResource, else nvidia.com/mig-<migProfile>,
else nvidia.com/gpu. */}}
{{- define "inferscale.pool.gpuResource" -}}
{{- if .pool.gpuResource }}
{{- .pool.gpuResource }}
{{- else if .pool.migProfile }}
{{- printf "nvidia.com/mig-%s" .pool.migProfile }}
{{- else }}
{{- "nvidia.com/gpu" }}
{{- end }}
{{- end }}

{{/* Seconds (a float) of a Go duration string such as "1m30s" or "500ms";
values.schema.json guarantees the format. */}}
{{- define "inferscale.durationFloat" -}}
{{- $mult := dict "h" 3600.0 "m" 60.0 "s" 1.0 "ms" 0.001 "us" 0.000001 "µs" 0.000001 "ns" 0.000000001 }}
{{- $total := 0.0 }}
{{- range (regexFindAll "[0-9]+(\\.[0-9]+)?(ns|us|µs|ms|s|m|h)" (toString .) -1) }}
{{- $num := regexFind "^[0-9]+(\\.[0-9]+)?" . }}
{{- $total = addf $total (mulf (float64 $num) (index $mult (trimPrefix $num .))) }}
{{- end }}
{{- $total }}
{{- end }}

{{/* Whole seconds (rounded up) of a Go duration string. */}}
{{- define "inferscale.durationSeconds" -}}
{{- include "inferscale.durationFloat" . | float64 | ceil | int }}
{{- end }}

{{/* Fails the render when a Go duration is outside [min, max] seconds, the range the process
(by) refuses at start, so the error comes from helm and not from a crash-looping pod.
Call with (dict "field" <values path> "value" <duration> "min" <s> "max" <s> "range" <text> "by" <process>). */}}
{{- define "inferscale.checkDuration" -}}
{{- $sec := include "inferscale.durationFloat" .value | float64 }}
{{- if or (lt $sec (float64 .min)) (gt $sec (float64 .max)) }}
{{- fail (printf "%s: %q must be a duration in %s (%s refuses it)" .field (toString .value) .range .by) }}
{{- end }}
{{- end }}

{{/* Fails the render when one of .keys of .map is null. --set key=null deletes a key before
the schema sees it, so a required value would render empty or fall to another default.
Call with (dict "field" <name in the error> "set" <its --set path> "map" <map> "keys" <list>). */}}
{{- define "inferscale.checkNotNull" -}}
{{- range $k := .keys }}
{{- if kindIs "invalid" (index $.map $k) }}
{{- fail (printf "%s.%s is null (--set %s.%s=null removes the chart's default): set a value in the range values.schema.json gives (\"\" where the key may be empty)" $.field $k $.set $k) }}
{{- end }}
{{- end }}
{{- end }}

{{/* Rules the schema cannot state; included once by scaler-deployment.yaml. */}}
{{- define "inferscale.validate" -}}
{{- $full := include "inferscale.fullname" . }}
{{- if not (regexMatch "^[a-z]([-a-z0-9]*[a-z0-9])?$" $full) }}
{{- fail (printf "the chart's full name %q (from the release name %q, nameOverride and fullnameOverride) names the Services, so it must be a DNS-1035 label: lower-case letters, digits and '-', starting with a letter; set fullnameOverride" $full .Release.Name) }}
{{- end }}
{{- $p := .Values.prometheus }}
{{- $pSecret := include "inferscale.prometheusAddressSecretName" . }}
{{- if and $p.address $pSecret }}
{{- fail (printf "prometheus.address and prometheus.addressSecret.name (%q) are both set: set prometheus.address to \"\" to read the address from the Secret (address is a container argument, which anyone who can read the Deployments sees)" $pSecret) }}
{{- end }}
{{- if not (or $p.address $pSecret) }}
{{- fail "prometheus: set address or addressSecret.name (a Secret holding the address)" }}
{{- end }}
{{- $c := .Values.scaler.config }}
{{- /* The flag would render empty (--graceful-stop-timeout=, which cmd/scaler refuses at
start) or as a different setting (objectMetricsMaxTriggers 0: no bound). opencostAddressSecret
is null by default (no Secret). */}}
{{- include "inferscale.checkNotNull" (dict "field" "scaler.config" "set" "scaler.config" "map" $c "keys" (list "grpcPort" "metricsPort" "prometheusAddress" "refreshInterval" "queryTimeout" "queryConcurrency" "forgetAfter" "namespaceLabel" "podLabel" "gracefulStopTimeout" "objectMetrics" "objectMetricsMaxTriggers" "opencostAddress" "opencostWindow" "opencostRefresh" "logLevel" "logFormat")) }}
{{- /* An empty trigger type is an invalid ScaledObject; a null margin renders a grace period
with no margin past the drain, and a null pre-stop sleep a 1 s Triton exit timeout. */}}
{{- include "inferscale.checkNotNull" (dict "field" "drain" "set" "drain" "map" .Values.drain "keys" (list "preStopSleepSeconds" "marginSeconds")) }}
{{- include "inferscale.checkNotNull" (dict "field" "keda" "set" "keda" "map" .Values.keda "keys" (list "triggerType" "pollingInterval" "cooldownPeriod")) }}
{{- if .Values.keda.fallback }}
{{- include "inferscale.checkNotNull" (dict "field" "keda.fallback" "set" "keda.fallback" "map" .Values.keda.fallback "keys" (list "failureThreshold" "replicas" "behavior")) }}
{{- end }}
{{- include "inferscale.checkNotNull" (dict "field" "scaling" "set" "scaling" "map" .Values.scaling "keys" (list "minReplicas" "maxReplicas")) }}
{{- $ocSecret := include "inferscale.opencostAddressSecretName" . }}
{{- if and $c.opencostAddress $ocSecret }}
{{- fail (printf "scaler.config.opencostAddress and scaler.config.opencostAddressSecret.name (%q) are both set: keep one (opencostAddress is a container argument, which anyone who can read the Deployment sees)" $ocSecret) }}
{{- end }}
{{- $by := "cmd/scaler" }}
{{- include "inferscale.checkDuration" (dict "field" "scaler.config.refreshInterval" "value" $c.refreshInterval "min" 0.1 "max" 600 "range" "[100ms, 10m]" "by" $by) }}
{{- include "inferscale.checkDuration" (dict "field" "scaler.config.queryTimeout" "value" $c.queryTimeout "min" 0.1 "max" 300 "range" "[100ms, 5m]" "by" $by) }}
{{- include "inferscale.checkDuration" (dict "field" "scaler.config.gracefulStopTimeout" "value" $c.gracefulStopTimeout "min" 0 "max" 300 "range" "[0s, 5m]" "by" $by) }}
{{- include "inferscale.checkDuration" (dict "field" "scaler.config.opencostWindow" "value" $c.opencostWindow "min" 600 "max" 604800 "range" "[10m, 168h]" "by" $by) }}
{{- $window := include "inferscale.durationFloat" $c.opencostWindow | float64 }}
{{- if ne (mulf (floor (divf $window 60)) 60) $window }}
{{- fail (printf "scaler.config.opencostWindow: %q must be whole minutes (cmd/scaler refuses it)" (toString $c.opencostWindow)) }}
{{- end }}
{{- include "inferscale.checkDuration" (dict "field" "scaler.config.opencostRefresh" "value" $c.opencostRefresh "min" 60 "max" 3600 "range" "[1m, 1h]" "by" $by) }}
{{- $refresh := include "inferscale.durationFloat" $c.refreshInterval | float64 }}
{{- if lt (include "inferscale.durationFloat" $c.forgetAfter | float64) $refresh }}
{{- fail (printf "scaler.config.forgetAfter: %q must be at least scaler.config.refreshInterval (%s); cmd/scaler refuses it" (toString $c.forgetAfter) (toString $c.refreshInterval)) }}
{{- end }}
{{- end }}

{{/* Fails the render when the pool's residency flags are outside the ranges cmd/residency
accepts (residency.Config.Validate). Call with (dict "pool" $pool "rc" <merged residency config>). */}}
{{- define "inferscale.pool.checkResidency" -}}
{{- $rc := .rc }}
{{- $by := "cmd/residency" }}
{{- $f := printf "pools[%s].residency.config" .pool.name }}
{{- /* Every flag below needs its value. */}}
{{- include "inferscale.checkNotNull" (dict "field" $f "set" "residency.config" "map" $rc "keys" (list "port" "reserveBytes" "nvml" "loopInterval" "failureBackoff" "failureBackoffMax" "drainTimeout" "propagationDelay" "drainPollInterval" "quarantineAfter" "maxConcurrentLoads" "holdMaxTotalBytes" "freeIdle")) }}
{{- include "inferscale.checkDuration" (dict "field" (printf "%s.loopInterval" $f) "value" $rc.loopInterval "min" 0.1 "max" 600 "range" "[100ms, 10m]" "by" $by) }}
{{- include "inferscale.checkDuration" (dict "field" (printf "%s.failureBackoff" $f) "value" $rc.failureBackoff "min" 0.1 "max" 3600 "range" "[100ms, 1h]" "by" $by) }}
{{- $lo := maxf 0.1 (include "inferscale.durationFloat" $rc.failureBackoff | float64) }}
{{- include "inferscale.checkDuration" (dict "field" (printf "%s.failureBackoffMax" $f) "value" $rc.failureBackoffMax "min" $lo "max" 86400 "range" (printf "[failureBackoff (%s), 24h]" (toString $rc.failureBackoff)) "by" $by) }}
{{- include "inferscale.checkDuration" (dict "field" (printf "%s.drainTimeout" $f) "value" $rc.drainTimeout "min" 1 "max" 3600 "range" "[1s, 1h]" "by" $by) }}
{{- include "inferscale.checkDuration" (dict "field" (printf "%s.propagationDelay" $f) "value" $rc.propagationDelay "min" 0 "max" 300 "range" "[0s, 5m]" "by" $by) }}
{{- include "inferscale.checkDuration" (dict "field" (printf "%s.drainPollInterval" $f) "value" $rc.drainPollInterval "min" 0.01 "max" 60 "range" "[10ms, 1m]" "by" $by) }}
{{- end }}

{{/* Seconds the sidecar's drain may take: --propagation-delay + --drain-timeout (the drain
timeout starts after the propagation delay). Call with the pool's residency config. */}}
{{- define "inferscale.drainSeconds" -}}
{{- add (include "inferscale.durationSeconds" .propagationDelay | int) (include "inferscale.durationSeconds" .drainTimeout | int) }}
{{- end }}

{{/* terminationGracePeriodSeconds of the pool. Kubernetes signals every container at once
and kills them all when the grace period ends, so it must outlast the whole drain:
with the sidecar, propagationDelay + drainTimeout + marginSeconds; without it,
preStopSleepSeconds + marginSeconds. pools[].drain overrides drain. */}}
{{- define "inferscale.pool.gracePeriod" -}}
{{- $d := mergeOverwrite (deepCopy .root.Values.drain) (deepCopy (.pool.drain | default dict)) }}
{{- if include "inferscale.pool.hasSidecar" . }}
{{- $rc := include "inferscale.pool.residencyConfig" . | fromYaml }}
{{- add (include "inferscale.drainSeconds" $rc | int) (int $d.marginSeconds) }}
{{- else }}
{{- add (int $d.preStopSleepSeconds) (int $d.marginSeconds) }}
{{- end }}
{{- end }}

{{/* Bytes, as a float, of a Go GOMEMLIMIT (96MiB, 1GiB, 100663296) or a Kubernetes memory
quantity in any of its forms (128Mi, 134217728, 128M, 0.125Gi, 1e9, +128Mi, 128m), or of a
number (a values file's 134217728 reaches the template as a float); "" for anything else, which
the callers refuse. Float arithmetic, so a large value cannot wrap. */}}
{{- define "inferscale.bytes" -}}
{{- if or (kindIs "float64" .) (kindIs "int" .) (kindIs "int64" .) }}
{{- float64 . }}
{{- else }}
{{- $s := toString . }}
{{- $n := regexFind "^\\+?([0-9]+(\\.[0-9]*)?|\\.[0-9]+)([eE][+-]?[0-9]+)?" $s }}
{{- $units := dict "" 1.0 "B" 1.0 "m" 0.001 "k" 1e3 "M" 1e6 "G" 1e9 "T" 1e12 "P" 1e15 "E" 1e18 "Ki" 1024.0 "KiB" 1024.0 "Mi" 1048576.0 "MiB" 1048576.0 "Gi" 1073741824.0 "GiB" 1073741824.0 "Ti" 1099511627776.0 "TiB" 1099511627776.0 "Pi" 1125899906842624.0 "Ei" 1152921504606846976.0 }}
{{- $u := trimPrefix $n $s }}
{{- if and $n (hasKey $units $u) }}
{{- mulf (float64 (trimPrefix "+" $n)) (get $units $u) }}
{{- end }}
{{- end }}
{{- end }}

{{/* The bytes of a memory limit (field names it), or "" when there is none; fails the render
when it is set in a form inferscale.bytes does not read, instead of skipping the checks. */}}
{{- define "inferscale.memoryLimitBytes" -}}
{{- $v := .value }}
{{- if not (kindIs "invalid" $v) }}
{{- $b := include "inferscale.bytes" $v }}
{{- if not $b }}
{{- fail (printf "%s: %q is not a memory quantity (such as 128Mi, 1Gi or 134217728)" .field (toString $v)) }}
{{- end }}
{{- $b }}
{{- end }}
{{- end }}

{{/* Fails the render when env or extraArgs set what the chart's checked value sets
(GOMEMLIMIT; a flag), since the later entry wins and bypasses the check. Call with (dict
"component" <values path> "env" <list> "args" <list> "flags" <list of flags>). */}}
{{- define "inferscale.checkNoOverride" -}}
{{- $c := .component }}
{{- range .env }}
{{- if eq (toString .name) "GOMEMLIMIT" }}
{{- fail (printf "%s.env sets GOMEMLIMIT, which %s.goMemLimit sets and the chart checks: set %s.goMemLimit instead" $c $c $c) }}
{{- end }}
{{- end }}
{{- range $a := .args }}
{{- range $f := $.flags }}
{{- if or (eq (toString $a) $f) (hasPrefix (printf "%s=" $f) (toString $a)) }}
{{- fail (printf "%s.extraArgs sets %s, which the chart sets from a checked value: set that value instead" $c $f) }}
{{- end }}
{{- end }}
{{- end }}
{{- end }}

{{/* Fails the render when the sidecar's memory settings cannot hold what its front may hold
(BENCHMARKS.md, "Sidecar memory while holding"): --hold-max-total-bytes at most half the
memory limit, and GOMEMLIMIT, when set, between held + 32 MiB (the sidecar's own 16 MiB heap and
the 16 MiB of forwarded requests its front keeps, --retain-max-total-bytes' default) and the
limit − 20 MiB (the binary's mapped pages). Call with (dict "root" $ "pool" $pool "rc" $residencyConfig). */}}
{{- define "inferscale.checkSidecarMemory" -}}
{{- $r := .root.Values.residency }}
{{- $name := .pool.name }}
{{- $held := float64 .rc.holdMaxTotalBytes }}
{{- include "inferscale.checkNoOverride" (dict "component" "residency" "env" $r.env "args" $r.extraArgs "flags" (list "--hold-max-total-bytes" "-hold-max-total-bytes")) }}
{{- range $a := $r.extraArgs }}
{{- range $f := list "--retain-max-total-bytes" "-retain-max-total-bytes" }}
{{- if or (eq (toString $a) $f) (hasPrefix (printf "%s=" $f) (toString $a)) }}
{{- fail (printf "residency.extraArgs sets %s, which the chart's memory check counts at cmd/residency's default (16 MiB of forwarded requests kept, beside holdMaxTotalBytes): leave it at its default" $f) }}
{{- end }}
{{- end }}
{{- end }}
{{- $memText := (($r.resources | default dict).limits | default dict).memory }}
{{- $lim := include "inferscale.memoryLimitBytes" (dict "field" "residency.resources.limits.memory" "value" $memText) }}
{{- $gmlText := toString ($r.goMemLimit | default "") }}
{{- $gml := "" }}
{{- if and $gmlText (ne $gmlText "off") }}
{{- $gml = include "inferscale.bytes" $gmlText }}
{{- if lt (float64 $gml) (addf $held 33554432.0) }}
{{- fail (printf "pools[%s]: residency.goMemLimit %q is below the sidecar's holdMaxTotalBytes (%.0f bytes; residency.config or pools[].residency.config) + 32 MiB (its own heap and the forwarded requests it keeps): it would collect without pause while holding requests; keep it in [holdMaxTotalBytes + 32 MiB, resources.limits.memory − 20 MiB]" $name $gmlText $held) }}
{{- end }}
{{- end }}
{{- if $lim }}
{{- if gt (mulf $held 2.0) (float64 $lim) }}
{{- fail (printf "pools[%s]: residency.config.holdMaxTotalBytes (%.0f bytes) is more than half residency.resources.limits.memory (%s): a sidecar holding its full budget would be OOM-killed; raise the limit with it" $name $held (toString $memText)) }}
{{- end }}
{{- if and $gml (gt (float64 $gml) (subf (float64 $lim) 20971520.0)) }}
{{- fail (printf "pools[%s]: residency.goMemLimit %q is above residency.resources.limits.memory (%s) − 20 MiB (the binary's mapped pages): the sidecar would be OOM-killed before the Go runtime acts; keep it in [holdMaxTotalBytes + 32 MiB, resources.limits.memory − 20 MiB]" $name $gmlText (toString $memText)) }}
{{- end }}
{{- end }}
{{- end }}
