//go:build !cgo

package capacity

// driverVersions: go-nvml needs cgo; a build without it reads no versions.
func driverVersions() (driver, cuda string) { return "", "" }
