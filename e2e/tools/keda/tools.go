//go:build tools

// Package tools pins the KEDA operator and metrics adapter the e2e suite runs;
// e2e/tools/build.sh builds them from this module.
package tools

import (
	_ "github.com/kedacore/keda/v2/cmd/adapter"
	_ "github.com/kedacore/keda/v2/cmd/operator"
)
