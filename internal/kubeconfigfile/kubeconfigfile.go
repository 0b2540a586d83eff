// Package kubeconfigfile reads kubeconfigs for the ledger and the scaler, each file opened once
// and read to at most MaxBytes, in place of client-go's clientcmd loading, which reads every
// file it meets whole, with no bound: --kubeconfig=/dev/zero, a zero-size file that streams
// (/proc/self/pagemap), a certificate-authority of /dev/zero, or a ~/.kube/.kubeconfig that
// client-go's legacy migration copies to ~/.kube/config, each read until the process ran out
// of memory. Both binaries take a --kubeconfig; this is their one implementation.
//
// LoadFile and LoadFiles decode as clientcmd.LoadFromFile does (every cluster, user and
// context's LocationOfOrigin is its file; relative paths in a file resolve against its
// directory, clientcmd.ResolveLocalPaths) and merge as clientcmd's loading rules do, with no
// migration: nothing is ever written. The current context's certificate-authority,
// client-certificate and client-key files are then read through the same bound and put in
// the config as data, so client-go never opens them; its tokenFile is read through the bound
// too (see LoadFile). RESTConfig builds the client configuration from the result.
package kubeconfigfile

import (
	"errors"
	"fmt"
	"io/fs"

	"github.com/inferscale/inferscale/internal/boundedfile"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// MaxBytes bounds a kubeconfig file and the tokenFile it names, in bytes (1 MiB). A kubeconfig
// with a few clusters and embedded certificates is kilobytes. The CA bundle, client
// certificate and key it names are TLS files, bounded as every TLS file a command reads is, by
// boundedfile.MaxPEMBytes (also 1 MiB; Debian's whole CA bundle is about 220 KB).
const MaxBytes = 1 << 20

// ReadFile returns the contents of the kubeconfig at path. The file is opened once, without
// blocking (a FIFO's open does not wait for a writer), and the opened file must be a regular
// file (fstat, so a path swapped after a check cannot slip through) of at most MaxBytes; at
// most MaxBytes+1 bytes are read from it, so a file whose size says 0 but that streams
// (/proc/self/pagemap) is refused too. flag names where the path came from in the errors
// ("--kubeconfig", "Kubeconfig (--kubeconfig)", "kubeconfig ($KUBECONFIG or ~/.kube/config)"):
//   - `<flag> "<path>": open <path>: <reason>` when it cannot be opened (missing: wraps
//     fs.ErrNotExist);
//   - `<flag> "<path>": not a regular file (<mode type>); want a kubeconfig file` for a
//     device, directory, FIFO or socket;
//   - `<flag> "<path>": <size> bytes, larger than 1048576 (1 MiB); want a kubeconfig file`;
//   - `<flag> "<path>": more than 1048576 bytes (1 MiB) read, though its size is <size>; want
//     a kubeconfig file` for a file that streams past its size.
func ReadFile(flag, path string) ([]byte, error) {
	return read(flag, path, "a kubeconfig file", MaxBytes)
}

// read is ReadFile for any file a kubeconfig names: prefix starts each error, want ends the
// refusals ("a kubeconfig file", "a PEM file", "a token file"); limit is MaxBytes or
// boundedfile.MaxPEMBytes, both 1 MiB, as the errors say. The reading is
// boundedfile.ReadRegular's.
func read(prefix, path, want string, limit int64) ([]byte, error) {
	data, err := boundedfile.ReadRegular(path, limit)
	var notRegular *boundedfile.NotRegularError
	var tooLarge *boundedfile.TooLargeError
	switch {
	case errors.As(err, &notRegular):
		return nil, fmt.Errorf("%s %q: not a regular file (%v); want %s", prefix, path, notRegular.Mode.Type(), want)
	case errors.As(err, &tooLarge) && tooLarge.Streamed:
		return nil, fmt.Errorf("%s %q: more than %d bytes (1 MiB) read, though its size is %d; want %s", prefix, path, tooLarge.Limit, tooLarge.Size, want)
	case errors.As(err, &tooLarge):
		return nil, fmt.Errorf("%s %q: %d bytes, larger than %d (1 MiB); want %s", prefix, path, tooLarge.Size, tooLarge.Limit, want)
	case err != nil:
		return nil, fmt.Errorf("%s %q: %w", prefix, path, err)
	}
	return data, nil
}

// LoadFile reads the kubeconfig at path (a --kubeconfig: it must exist, as clientcmd's
// ExplicitPath) through ReadFile and returns it decoded, its relative paths resolved against
// its directory, and the current context's files read in (below). No other file is read:
// neither $KUBECONFIG's nor ~/.kube/config, and nothing is migrated or written.
//
// The current context's cluster certificate-authority and user client-certificate and
// client-key (the key only with a certificate, as client-go uses it) are read through the
// same bound, must be regular files, and replace their paths as *-data. Its user tokenFile
// must be a regular file of at most MaxBytes too, and is read through the bound into the
// token when the user has none; the path stays, as rest.Config.BearerTokenFile, so that
// client-go's transport follows a rotation: it reads the file again itself, at the first
// request and at most once a minute after (os.ReadFile, unbounded). Those re-reads are
// client-go's: this check holds at load only. A file given both as a path and as data is an
// error, as client-go's validation has it. Errors start `<flag> "<kubeconfig>": cluster
// "<name>": certificate-authority "<path>": …`, `… user "<name>": client-certificate …` and
// so on, the rest as ReadFile's with "want a PEM file" or "want a token file".
func LoadFile(flag, path string) (*clientcmdapi.Config, error) {
	cfg, err := decodeFile(flag, path)
	if err != nil {
		return nil, err
	}
	merged := merge([]*clientcmdapi.Config{cfg})
	if err := inline(flag, merged); err != nil {
		return nil, err
	}
	return merged, nil
}

// LoadFiles reads the kubeconfigs at paths ($KUBECONFIG's files, else ~/.kube/config: the
// Precedence of clientcmd.NewDefaultClientConfigLoadingRules, whose Load is never called) as
// clientcmd's loading rules do, with no migration: each through ReadFile, a missing one or an
// empty path skipped, merged with the first file to set a cluster, user, context, extension
// or the current context winning, then the current context's files read in as LoadFile says.
// Each path is read as given (client-go's Precedence is already deduplicated); none is
// written. No file at all is an empty config, which clientcmd takes for no configuration.
func LoadFiles(flag string, paths []string) (*clientcmdapi.Config, error) {
	merged, err := loadFiles(flag, paths)
	if err != nil {
		return nil, err
	}
	if err := inline(flag, merged); err != nil {
		return nil, err
	}
	return merged, nil
}

// loadFiles is LoadFiles before inline: what clientcmd's ClientConfigLoadingRules.Load
// returns for Precedence paths, without its migration and with the bound.
func loadFiles(flag string, paths []string) (*clientcmdapi.Config, error) {
	var cfgs []*clientcmdapi.Config
	for _, p := range paths {
		if p == "" {
			continue
		}
		cfg, err := decodeFile(flag, p)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, err
		}
		cfgs = append(cfgs, cfg)
	}
	return merge(cfgs), nil
}

// RESTConfig is the client configuration from cfg (LoadFile's or LoadFiles'), as clientcmd's
// deferred loading makes it with no overrides: cfg's current context, and the pod's
// in-cluster service account when cfg gives no configuration (clientcmd.IsEmptyConfig
// otherwise). Its errors are clientcmd's, unwrapped.
func RESTConfig(cfg *clientcmdapi.Config) (*rest.Config, error) {
	return clientcmd.BuildConfigFromKubeconfigGetter("", func() (*clientcmdapi.Config, error) { return cfg, nil })
}

// decodeFile reads path through ReadFile and decodes it as clientcmd.LoadFromFile does: every
// cluster, user and context has path as its LocationOfOrigin, and the relative file paths in
// its clusters and users are resolved against path's directory (clientcmd.ResolveLocalPaths).
func decodeFile(flag, path string) (*clientcmdapi.Config, error) {
	data, err := ReadFile(flag, path)
	if err != nil {
		return nil, err
	}
	cfg, err := clientcmd.Load(data)
	if err != nil {
		return nil, fmt.Errorf("%s %q: %w", flag, path, err)
	}
	if cfg.AuthInfos == nil {
		cfg.AuthInfos = map[string]*clientcmdapi.AuthInfo{}
	}
	if cfg.Clusters == nil {
		cfg.Clusters = map[string]*clientcmdapi.Cluster{}
	}
	if cfg.Contexts == nil {
		cfg.Contexts = map[string]*clientcmdapi.Context{}
	}
	for k, v := range cfg.AuthInfos {
		if v == nil {
			delete(cfg.AuthInfos, k)
			continue
		}
		v.LocationOfOrigin = path
	}
	for k, v := range cfg.Clusters {
		if v == nil {
			delete(cfg.Clusters, k)
			continue
		}
		v.LocationOfOrigin = path
	}
	for k, v := range cfg.Contexts {
		if v == nil {
			delete(cfg.Contexts, k)
			continue
		}
		v.LocationOfOrigin = path
	}
	if err := clientcmd.ResolveLocalPaths(cfg); err != nil {
		return nil, fmt.Errorf("%s %q: %w", flag, path, err)
	}
	return cfg, nil
}

// merge merges cfgs as clientcmd's ClientConfigLoadingRules.Load does (its merge is
// unexported): the first config to set a cluster, user, context or extension (whole entries,
// never field by field) or a non-empty scalar (the current context, kind, apiVersion) wins;
// preferences.colors is set if any sets it.
func merge(cfgs []*clientcmdapi.Config) *clientcmdapi.Config {
	out := clientcmdapi.NewConfig()
	for _, c := range cfgs {
		if out.Kind == "" {
			out.Kind = c.Kind
		}
		if out.APIVersion == "" {
			out.APIVersion = c.APIVersion
		}
		if out.CurrentContext == "" {
			out.CurrentContext = c.CurrentContext
		}
		out.Preferences.Colors = out.Preferences.Colors || c.Preferences.Colors
		mergeFirst(out.Preferences.Extensions, c.Preferences.Extensions)
		mergeFirst(out.Clusters, c.Clusters)
		mergeFirst(out.AuthInfos, c.AuthInfos)
		mergeFirst(out.Contexts, c.Contexts)
		mergeFirst(out.Extensions, c.Extensions)
	}
	return out
}

// mergeFirst adds src's keys that dst does not have.
func mergeFirst[V any](dst, src map[string]V) {
	for k, v := range src {
		if _, ok := dst[k]; !ok {
			dst[k] = v
		}
	}
}

// inline reads the files of cfg's current context (its cluster's certificate-authority, its
// user's client-certificate, client-key and tokenFile) through the bound, as LoadFile says.
// Other contexts' files are not read: client-go would not read them either.
func inline(flag string, cfg *clientcmdapi.Config) error {
	ctx := cfg.Contexts[cfg.CurrentContext]
	if ctx == nil {
		return nil // client-go finds no configuration, or no such context, and says so
	}
	if c := cfg.Clusters[ctx.Cluster]; c != nil {
		at := fmt.Sprintf("%s %q: cluster %q:", flag, c.LocationOfOrigin, ctx.Cluster)
		if err := inlineFile(at, "certificate-authority", &c.CertificateAuthority, &c.CertificateAuthorityData); err != nil {
			return err
		}
	}
	u := cfg.AuthInfos[ctx.AuthInfo]
	if u == nil {
		return nil
	}
	at := fmt.Sprintf("%s %q: user %q:", flag, u.LocationOfOrigin, ctx.AuthInfo)
	if u.ClientCertificate != "" || len(u.ClientCertificateData) > 0 {
		if err := inlineFile(at, "client-certificate", &u.ClientCertificate, &u.ClientCertificateData); err != nil {
			return err
		}
		if err := inlineFile(at, "client-key", &u.ClientKey, &u.ClientKeyData); err != nil {
			return err
		}
	}
	if u.TokenFile != "" {
		// Checked and read even beside a token: client-go's transport re-reads the file
		// (rest.Config.BearerTokenFile) either way.
		data, err := read(at+" tokenFile", u.TokenFile, "a token file", MaxBytes)
		if err != nil {
			return err
		}
		if u.Token == "" {
			// What client-go's ClientConfig would read (whole) into the token itself; the
			// file stays for its rotation re-reads.
			u.Token = string(data)
		}
	}
	return nil
}

// inlineFile reads *path through the bound into *data and clears *path. Both given is an
// error: client-go's validation refuses it too (it names the data as the winner but fails).
func inlineFile(at, field string, path *string, data *[]byte) error {
	if *path == "" {
		return nil
	}
	if len(*data) > 0 {
		return fmt.Errorf("%s %s-data and %s %q are both given; want one", at, field, field, *path)
	}
	b, err := read(at+" "+field, *path, "a PEM file", boundedfile.MaxPEMBytes)
	if err != nil {
		return err
	}
	*data, *path = b, ""
	return nil
}
