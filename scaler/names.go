package scaler

import (
	"hash/fnv"
	"slices"
	"strconv"
	"strings"
)

// metricNamePrefixBudget is the longest name MetricName returns. KEDA
// prefixes `s<trigger index>-` (GenerateMetricNameWithIndex in
// pkg/scalers/scaler.go) before the name reaches the HPA; 56 leaves room for
// indexes up to s9999- within 63 characters, the length of a DNS label, so
// the HPA's external metric name stays a short, valid path segment.
const metricNameMaxLen = 56

// MetricName is the one function that builds the metric name GetMetricSpec
// advertises and GetMetrics answers to. KEDA strips its `sN-` prefix before
// calling back, so the name it asks for is exactly this string.
//
// The name is `<namespace>-<name>` lowercased, with every character outside
// [a-z0-9-] replaced by '-', truncated, and followed by '-' and 16 hex digits
// of a 64-bit FNV-1a hash of the namespace, the ScaledObject name and the
// trigger's metadata (sorted key=value pairs). Two ScaledObjects, or two
// triggers of one ScaledObject with different metadata, therefore never share
// a name (a collision needs a 64-bit hash collision); the readable part is
// for humans only. The result matches [a-z0-9-]+ and is at most 56 bytes.
func MetricName(namespace, name string, metadata map[string]string) string {
	h := fnv.New64a()
	write := func(s string) {
		h.Write([]byte(strconv.Itoa(len(s)))) // length-prefixed: no ambiguity between fields
		h.Write([]byte{':'})
		h.Write([]byte(s))
	}
	write(namespace)
	write(name)
	keys := make([]string, 0, len(metadata))
	for k := range metadata {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		write(k)
		write(metadata[k])
	}
	sum := strconv.FormatUint(h.Sum64(), 16)
	sum = strings.Repeat("0", 16-len(sum)) + sum

	readable := sanitize(namespace + "-" + name)
	if room := metricNameMaxLen - 1 - len(sum); len(readable) > room {
		readable = readable[:room]
	}
	readable = strings.Trim(readable, "-")
	if readable == "" {
		return "inferscale-" + sum
	}
	return readable + "-" + sum
}

func sanitize(s string) string {
	var b strings.Builder
	b.Grow(len(s))
	for _, r := range strings.ToLower(s) {
		if (r >= 'a' && r <= 'z') || (r >= '0' && r <= '9') || r == '-' {
			b.WriteRune(r)
		} else {
			b.WriteByte('-')
		}
	}
	return b.String()
}
