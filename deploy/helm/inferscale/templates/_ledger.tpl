{{/* ---------------- capacity ledger ---------------- */}}

{{/* Also the CronJob's name, which Kubernetes caps at 52 characters (its Jobs add 11). */}}
{{- define "inferscale.ledger.fullname" -}}
{{- printf "%s-ledger" (include "inferscale.fullname" .) | trunc 52 | trimSuffix "-" }}
{{- end }}

{{/* The ConfigMap each ledger run replaces with its report. */}}
{{- define "inferscale.ledger.reportName" -}}
{{- printf "%s-ledger-report" (include "inferscale.fullname" .) | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* Cluster-scoped names must be unique across namespaces: prefix the namespace (not cut at
63 characters; see inferscale.scaler.clusterRoleName). */}}
{{- define "inferscale.ledger.clusterRoleName" -}}
{{- printf "%s-%s" .Release.Namespace (include "inferscale.ledger.fullname" .) }}
{{- end }}
