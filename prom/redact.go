package prom

import (
	"errors"
	"net/url"
	"strings"
)

// redacted replaces a secret in an address shown in a log or an error (url.URL.Redacted's
// placeholder).
const redacted = "xxxxx"

// RedactAddress returns addr as logs, errors, events and gRPC answers show it: the password
// of its userinfo replaced by "xxxxx" ([url.URL.Redacted]; the user stays) and so is the value
// of every query parameter, because client_golang sends a base URL's query with every query
// (an access token may be there). The request itself still uses the address as given. An
// address that does not parse is redacted from its text by the same rule, and more: all of
// it between the user and the last "@" is replaced, and so is one that parses with an "@"
// after its host (a password with an unencoded "/", "?" or "#"). A fragment is replaced too.
// An address without "@", "?" or "#" is returned as it is.
func RedactAddress(addr string) string {
	if !strings.ContainsAny(addr, "@?#") {
		return addr
	}
	u, err := url.Parse(addr)
	if err != nil || misparsedUserinfo(u) {
		return redactText(addr)
	}
	if u.Fragment != "" {
		c := *u
		c.Fragment, c.RawFragment = redacted, ""
		u = &c
	}
	if u.RawQuery != "" {
		c := *u
		c.RawQuery = redactQuery(u.RawQuery)
		u = &c
	}
	return u.Redacted()
}

// misparsedUserinfo reports an address that parsed without userinfo but has an "@" after its
// host: a password beginning with digits and holding an unencoded "/", "?" or "#"
// (http://user:123/secret@host reads as host "user", port 123, and the secret in the path,
// query or fragment).
func misparsedUserinfo(u *url.URL) bool {
	return u.User == nil && strings.Contains(u.Path+u.RawQuery+u.Fragment, "@")
}

// redactQuery keeps the names of a raw query's parameters and replaces their values (a
// parameter without "=" entirely).
func redactQuery(q string) string {
	parts := strings.Split(q, "&")
	for i, p := range parts {
		switch name, _, ok := strings.Cut(p, "="); {
		case ok:
			parts[i] = name + "=" + redacted
		case p != "":
			parts[i] = redacted
		}
	}
	return strings.Join(parts, "&")
}

// redactText redacts an address that does not parse: after the scheme, everything up to the
// last "@" but the user (up to the first ":", "/", "?" or "#") is replaced, and the values of
// the query after it, and its fragment.
func redactText(addr string) string {
	prefix, rest := "", addr
	if i := strings.Index(addr, "://"); i >= 0 {
		prefix, rest = addr[:i+3], addr[i+3:]
	}
	if at := strings.LastIndex(rest, "@"); at >= 0 {
		info := rest[:at]
		user := info
		if i := strings.IndexAny(info, ":/?#"); i >= 0 {
			user = info[:i]
		}
		if user != info {
			user += ":" + redacted
		}
		prefix, rest = prefix+user+"@", rest[at+1:]
	}
	// The fragment, as in a parsed address, is replaced whole: it was kept after a query, and
	// without one ("http://prom/%zz#token") all of it.
	rest, frag, hasFrag := strings.Cut(rest, "#")
	if i := strings.IndexByte(rest, '?'); i >= 0 {
		rest = rest[:i+1] + redactQuery(rest[i+1:])
	}
	if hasFrag && frag != "" {
		rest += "#" + redacted
	} else if hasFrag {
		rest += "#"
	}
	return prefix + rest
}

// RedactURLError returns err with the URL of the *url.Error the HTTP client returns (it
// quotes the URL it requested, query included; net/http hides only the password) redacted
// ([RedactAddress]); err as it is without one. A url.Error wrapped deeper is replaced, in the
// text, by its redacted URL, and the chain goes on from its cause. The poller applies it, and
// so do the other commands' HTTP clients (cmd/ledger's Prometheus and Pushgateway).
func RedactURLError(err error) error {
	if ue, ok := err.(*url.Error); ok {
		return &url.Error{Op: ue.Op, URL: RedactAddress(ue.URL), Err: ue.Err}
	}
	var ue *url.Error
	if !errors.As(err, &ue) {
		return err
	}
	return &redactedError{msg: strings.ReplaceAll(err.Error(), ue.URL, RedactAddress(ue.URL)), cause: ue.Err}
}

type redactedError struct {
	msg   string
	cause error
}

func (e *redactedError) Error() string { return e.msg }
func (e *redactedError) Unwrap() error { return e.cause }
