package envflag

import (
	"flag"
	"io"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestAddress(t *testing.T) {
	const env = "TEST_ADDRESS"
	tests := []struct {
		name    string
		args    []string
		env     string
		unset   bool   // the variable is not set at all (env is then ignored)
		want    string // the flag's value after Address
		wantErr string // "" for no error
	}{
		{name: "neither", unset: true, want: "http://default:9090"},
		{name: "flag only", args: []string{"--address=http://flag:9090"}, unset: true, want: "http://flag:9090"},
		{name: "env only", env: "https://reader:pw@prom.monitoring.svc:9090", want: "https://reader:pw@prom.monitoring.svc:9090"},
		{name: "flag wins", args: []string{"--address=http://flag:9090"}, env: "http://env:9090", want: "http://flag:9090"},
		{name: "an empty flag wins too", args: []string{"--address="}, env: "http://env:9090", want: ""},
		{name: "a refused env value is not read when the flag is given", args: []string{"--address=http://flag:9090"}, env: "http://169.254.169.254/", want: "http://flag:9090"},
		{name: "unset env is no value", unset: true, want: "http://default:9090"},
		{name: "empty env is refused, not read as unset", env: "", want: "http://default:9090",
			wantErr: "$TEST_ADDRESS (read as --address is not given) is set but empty: give an address or unset it (from a Secret: the key has no value); want an http:// or https:// URL"},
		{name: "white space only is empty", env: " \n", want: "http://default:9090", wantErr: "$TEST_ADDRESS (read as --address is not given) is set but empty"},
		{name: "an empty env is not read when the flag is given", args: []string{"--address=http://flag:9090"}, env: "", want: "http://flag:9090"},
		{name: "a Secret file's trailing newline is dropped", env: " http://env:9090\n", want: "http://env:9090"},
		{name: "refused env value names the variable and the flag, redacted, flag left unset",
			env:     "http://reader:s3cretPassw0rd@169.254.169.254:9090/?token=t0kenValue",
			want:    "http://default:9090",
			wantErr: `$TEST_ADDRESS (read as --address is not given) "http://reader:xxxxx@169.254.169.254:9090/?token=xxxxx": 169.254.169.254 is a link-local address (169.254.0.0/16, fe80::/10: cloud instance metadata lives there): refused; want an http:// or https:// URL with a host that is not a link-local, cloud-metadata or unspecified IP address`},
		{name: "env value that does not parse is redacted",
			env:     "http://reader:12/s3cret@prom:9090",
			want:    "http://default:9090",
			wantErr: `$TEST_ADDRESS (read as --address is not given) "http://reader:xxxxx@prom:9090": the user or password is not valid in a URL`},
		{name: "not a URL", env: "prom:9090", want: "http://default:9090", wantErr: `$TEST_ADDRESS (read as --address is not given) "prom:9090": must be an http:// or https:// URL with a host; want`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fs := flag.NewFlagSet("test", flag.ContinueOnError)
			fs.SetOutput(io.Discard)
			got := fs.String("address", "http://default:9090", "")
			if err := fs.Parse(tt.args); err != nil {
				t.Fatal(err)
			}
			err := Address(fs, "address", env, func(name string) (string, bool) {
				if name != env {
					t.Errorf("read $%s, want $%s", name, env)
				}
				return tt.env, !tt.unset
			})
			gotErr := ""
			if err != nil {
				gotErr = err.Error()
			}
			if tt.wantErr == "" && gotErr != "" || !strings.HasPrefix(gotErr, tt.wantErr) {
				t.Errorf("err = %q, want prefix %q", gotErr, tt.wantErr)
			}
			if strings.Contains(gotErr, "s3cret") || strings.Contains(gotErr, "t0ken") {
				t.Errorf("err %q shows the secret", gotErr)
			}
			if diff := cmp.Diff(tt.want, *got); diff != "" {
				t.Errorf("flag value (-want +got):\n%s", diff)
			}
		})
	}
}

func TestAddressUndefinedFlag(t *testing.T) {
	fs := flag.NewFlagSet("test", flag.ContinueOnError)
	err := Address(fs, "address", "TEST_ADDRESS", func(string) (string, bool) { return "http://env:9090", true })
	if err == nil || err.Error() != "$TEST_ADDRESS: flag --address is not defined" {
		t.Errorf("err = %v, want the undefined flag named", err)
	}
}
