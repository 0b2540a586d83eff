// Package envflag gives a command-line flag a fallback in an environment variable, for the
// values that must not be in a process's arguments: an address with a password or a token in
// it is readable by anyone who can read the pod spec or /proc/<pid>/cmdline, while an
// environment variable can come from a Secret (the chart's prometheus.addressSecret and
// scaler.config.opencostAddressSecret).
package envflag

import (
	"flag"
	"fmt"
	"strings"

	"github.com/inferscale/inferscale/prom"
)

// The variables, one name per value, the same in every command that takes it.
const (
	// PrometheusAddress is the fallback of every --prometheus-address (cmd/scaler,
	// cmd/residency, cmd/ledger).
	PrometheusAddress = "INFERSCALE_PROMETHEUS_ADDRESS"
	// OpenCostAddress is the fallback of cmd/scaler's --opencost-address.
	OpenCostAddress = "INFERSCALE_OPENCOST_ADDRESS"
)

// Address sets the flag named name of fs from the environment variable env (read through
// lookupEnv, os.LookupEnv outside tests) when the command line did not set the flag; call it
// after fs.Parse. The command line wins: a flag it gives, even empty, leaves the variable
// unread. An unset variable is no value. White space around the value is dropped (a Secret
// written from a file often ends in a newline, which no URL has); a variable that is set but
// empty once trimmed is an error: it is what a Secret key with no value gives through
// secretKeyRef, and reading it as unset would run the command on the flag's default (another
// Prometheus, or no OpenCost) without a word.
//
// The value must pass [prom.CheckAddress], the rule the commands apply to the flag. A refused
// value is an error naming the variable and the flag, with the address redacted
// ([prom.RedactAddress]: the password and query values) and cut to 256 bytes; the flag is then
// left unset, so the command's own validation does not report it a second time under the
// flag's name. A name fs does not define is an error too.
func Address(fs *flag.FlagSet, name, env string, lookupEnv func(string) (string, bool)) error {
	if fs.Lookup(name) == nil {
		return fmt.Errorf("$%s: flag --%s is not defined", env, name)
	}
	given := false
	fs.Visit(func(f *flag.Flag) { given = given || f.Name == name })
	if given {
		return nil
	}
	raw, set := lookupEnv(env)
	if !set {
		return nil
	}
	v := strings.TrimSpace(raw)
	if v == "" {
		return fmt.Errorf("$%s (read as --%s is not given) is set but empty: give an address or unset it (from a Secret: the key has no value); want %s", env, name, prom.AddressRule)
	}
	if err := prom.CheckAddress(v); err != nil {
		return fmt.Errorf("$%s (read as --%s is not given) %w; want %s", env, name, err, prom.AddressRule)
	}
	return fs.Set(name, v)
}
