//go:build tools

// Package tools pins the etcd server the e2e suite runs; go.etcd.io/etcd/server/v3
// is etcd's main package. e2e/tools/build.sh builds it from this module.
package tools

import (
	_ "go.etcd.io/etcd/server/v3"
)
