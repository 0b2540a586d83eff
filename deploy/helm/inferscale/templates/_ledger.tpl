{{/* ---------------- capacity ledger ---------------- */}}

{{- define "inferscale.ledger.fullname" -}}
{{- printf "%s-ledger" (include "inferscale.fullname" .) | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* The ConfigMap each ledger run replaces with its report. */}}
{{- define "inferscale.ledger.reportName" -}}
{{- printf "%s-ledger-report" (include "inferscale.fullname" .) | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* Cluster-scoped names must be unique across namespaces: prefix the namespace. */}}
{{- define "inferscale.ledger.clusterRoleName" -}}
{{- printf "%s-%s" .Release.Namespace (include "inferscale.ledger.fullname" .) | trunc 63 | trimSuffix "-" }}
{{- end }}
