{{/* The residency sidecar container; call with (dict "root" $ "pool" $pool "rc" $residencyConfig).
Its flags are cmd/residency's. */}}
{{- define "inferscale.pool.sidecar" -}}
{{- $root := .root }}
{{- $pool := .pool }}
{{- $rc := .rc }}
{{- $r := $root.Values.residency }}
{{- $res := $pool.residency | default dict }}
{{- $ports := mergeOverwrite (dict "http" 8000 "grpc" 8001 "metrics" 8002) (deepCopy ($pool.ports | default dict)) }}
- name: residency
  image: {{ include "inferscale.image" (dict "image" $r.image "root" $root) | quote }}
  imagePullPolicy: {{ $r.image.pullPolicy }}
  args:
    {{- /* The inference front (docs/residency.md "Hold and fail fast") takes the pool's gRPC and
    HTTP ports; Triton's own gRPC listens on 127.0.0.1 at that port + 100, inside the pod only,
    and Triton's own HTTP at the HTTP port + 100 (on every address, for the kubelet's probes). */}}
    - --triton-address=127.0.0.1:{{ add $ports.grpc 100 }}
    - --inference-listen=:{{ $ports.grpc }}
    - --inference-http-listen=:{{ $ports.http }}
    - --triton-http-url=http://127.0.0.1:{{ add $ports.http 100 }}
    - --triton-metrics-url=http://localhost:{{ $ports.metrics }}/metrics
    - --catalog=/etc/inferscale/catalog.yaml
    {{- if $res.budgetBytes }}
    - --budget-bytes={{ $res.budgetBytes | int64 }}
    {{- end }}
    {{- with ($res.migProfile | default $pool.migProfile) }}
    - --mig-profile={{ . }}
    {{- end }}
    - --reserve-bytes={{ $rc.reserveBytes | int64 }}
    - --nvml={{ $rc.nvml }}
    {{- $promAddr := $res.prometheusAddress | default $root.Values.prometheus.address }}
    {{- with $promAddr }}
    - {{ printf "--prometheus-address=%s" . | quote }}
    {{- end }}
    {{- with $res.demandQuery }}
    - {{ printf "--demand-query=%s" . | quote }}
    {{- end }}
    - --listen=:{{ $rc.port }}
    - --loop-interval={{ $rc.loopInterval }}
    - --free-idle={{ $rc.freeIdle }}
    - --max-concurrent-loads={{ $rc.maxConcurrentLoads }}
    - --failure-backoff={{ $rc.failureBackoff }}
    - --failure-backoff-max={{ $rc.failureBackoffMax }}
    - --quarantine-after={{ $rc.quarantineAfter }}
    - --drain-timeout={{ $rc.drainTimeout }}
    - --propagation-delay={{ $rc.propagationDelay }}
    - --drain-poll-interval={{ $rc.drainPollInterval }}
    - --hold-max-total-bytes={{ $rc.holdMaxTotalBytes | int64 }}
    {{- with $r.extraArgs }}
    {{- toYaml . | nindent 4 }}
    {{- end }}
  env:
    - name: POD_NAME
      valueFrom:
        fieldRef:
          fieldPath: metadata.name
    - name: POD_NAMESPACE
      valueFrom:
        fieldRef:
          fieldPath: metadata.namespace
    {{- if and (not $promAddr) (include "inferscale.prometheusAddressSecretName" $root) }}
    {{- include "inferscale.prometheusAddressEnv" $root | nindent 4 }}
    {{- end }}
    {{- with $r.goMemLimit }}
    - name: GOMEMLIMIT
      value: {{ . | quote }}
    {{- end }}
    {{- with $r.env }}
    {{- toYaml . | nindent 4 }}
    {{- end }}
  ports:
    - name: residency
      containerPort: {{ $rc.port }}
      protocol: TCP
    - name: http
      containerPort: {{ $ports.http }}
      protocol: TCP
    - name: grpc
      containerPort: {{ $ports.grpc }}
      protocol: TCP
  livenessProbe:
    httpGet:
      path: /healthz
      port: residency
    periodSeconds: 10
    timeoutSeconds: 3
    failureThreshold: 3
  resources:
    {{- toYaml $r.resources | nindent 4 }}
  securityContext:
    {{- toYaml $r.securityContext | nindent 4 }}
  volumeMounts:
    - name: catalog
      mountPath: /etc/inferscale
      readOnly: true
    - name: tmp
      mountPath: /tmp
    - name: kube-api-access
      mountPath: /var/run/secrets/kubernetes.io/serviceaccount
      readOnly: true
{{- end }}
