// Package prom is what inferscale's two running parts, the scaler (package scaler) and the
// residency sidecar (package residency), both need from Prometheus.
//
// It owns:
//
//   - the Prometheus base-URL rule ([CheckAddress]: no link-local, cloud-metadata or
//     unspecified IP, also refused by the dialer after resolution) and the API client setup
//     (client_golang's api client, one per address, inside the [Poller], its answers bounded
//     by [PollerConfig.MaxResponseBytes]);
//   - PromQL confinement: [Confine] rewrites a user-supplied PromQL query so that every
//     selector is pinned to one namespace, using Prometheus's own parser, so a ScaledObject or
//     a sidecar can never read another namespace's series;
//   - grouped queries: presets ([Preset], [PresetQuery]) hold the standard queries for Triton
//     and vLLM pools and for NVIDIA DCGM engine activity, grouped `by (namespace, model)`,
//     and the poller evaluates all of an engine's signals as one [PresetBundle];
//     [GroupByModel] turns a per-model template into one query grouped by the model label;
//     either is evaluated once for every subscriber and split per key;
//   - the background [Poller], which evaluates each distinct query once per refresh and keeps
//     the results in a snapshot. [Poller.Result] only reads the snapshot; it never waits on
//     Prometheus. The poller does not judge a value it passes on (NaN, negative, stale): its
//     callers do. It judges what it sums: a sum with a NaN, ±Inf or negative series would hide
//     it, so that key has no value and its Err wraps [ErrInvalidValue].
//   - redaction: every address the poller logs or puts in an error is [RedactAddress]'s
//     (password and query values "xxxxx"); the requests use the address as given.
//
// It must not import package scaler, scaler/…, residency or residency/…: it is shared by both
// and owned by neither, so a change to one running part cannot break the other through it.
// It imports client_golang, prometheus/common and the PromQL parser only.
package prom
