package sources

import (
	"net/url"
	"slices"
	"sort"
	"strings"
	"sync/atomic"
	"unicode"
)

// redacted replaces every secret in messages, URLs and logs.
const redacted = "REDACTED"

// redactor removes known secrets from text. Secrets come from the configuration
// (passwords, tokens, header values) and from the URL (user info, query values,
// key-like path segments such as a Hosted Graphite API key).
type redactor struct {
	secrets []string // longest first, so a secret containing another is removed whole
	// current, if set, returns the secrets read from files as they are now
	// (the client reads them at each request, so they may have changed).
	current func() []string
	// all is secrets and what current returned at the last refresh.
	all atomic.Pointer[[]string]
}

// refresh reads the secret files again; a source calls it after each
// request, before anything of the reply is shown. Once per fetch rather than
// at each String: a fetch may log hundreds of series names.
func (r *redactor) refresh() {
	if r.current == nil {
		return
	}
	now := &redactor{secrets: slices.Clone(r.secrets)}
	for _, sec := range r.current() {
		now.add(sec)
	}
	r.all.Store(&now.secrets)
}

// newRedactor collects the secrets of one source. rawURL may be unparsable; it is
// then treated as secret as a whole, since we cannot tell which part is the key.
func newRedactor(rawURL string, secrets ...string) *redactor {
	r := &redactor{}
	for _, s := range secrets {
		r.add(s)
	}
	u, err := url.Parse(rawURL)
	if err != nil {
		r.add(rawURL)
		return r
	}
	r.addURL(u)
	return r
}

func (r *redactor) addURL(u *url.URL) {
	if u.User != nil {
		r.add(u.User.Username())
		if p, ok := u.User.Password(); ok {
			r.add(p)
		}
	}
	for name, vs := range u.Query() {
		for _, v := range vs {
			if mayBeSecret(name, v) {
				r.add(v)
			}
		}
	}
	for _, seg := range strings.Split(u.Path, "/") {
		if looksLikeKey(seg) {
			r.add(seg)
		}
	}
	sort.Slice(r.secrets, func(i, j int) bool { return len(r.secrets[i]) > len(r.secrets[j]) })
}

// add registers s and the escaped forms it takes inside URLs and JSON.
func (r *redactor) add(s string) {
	if s == "" {
		return
	}
	for _, v := range []string{s, url.QueryEscape(s), url.PathEscape(s), strings.ReplaceAll(s, `"`, `\"`)} {
		if !contains(r.secrets, v) {
			r.secrets = append(r.secrets, v)
		}
	}
	sort.Slice(r.secrets, func(i, j int) bool { return len(r.secrets[i]) > len(r.secrets[j]) })
}

// String returns s with every secret replaced.
func (r *redactor) String(s string) string {
	secrets := r.secrets
	if all := r.all.Load(); all != nil {
		secrets = *all
	}
	for _, sec := range secrets {
		s = strings.ReplaceAll(s, sec, redacted)
	}
	return s
}

// Error returns err with its text redacted, keeping errors.Is/As working on the chain.
func (r *redactor) Error(err error) error {
	if err == nil {
		return nil
	}
	return &redactedError{msg: r.String(err.Error()), err: err}
}

// URL renders u for messages: no user info, secret parts replaced.
func (r *redactor) URL(u *url.URL) string {
	c := *u
	c.User = nil
	return r.String(c.String())
}

type redactedError struct {
	msg string
	err error
}

func (e *redactedError) Error() string { return e.msg }

func (e *redactedError) Unwrap() error { return e.err }

// looksLikeKey reports whether a URL path segment looks like an API key: long, with
// letters and several digits (UUIDs, hex tokens). Names like "graphite", "api-v1",
// "render" or a short account id stay readable.
func looksLikeKey(seg string) bool {
	if len(seg) < 16 {
		return false
	}
	letters, digits := 0, 0
	for _, c := range seg {
		switch {
		case unicode.IsLetter(c):
			letters++
		case unicode.IsDigit(c):
			digits++
		}
	}
	return letters > 0 && digits >= 4
}

// minSecretLen is the length from which a header or query value counts as a
// secret whatever its name. A shorter one under a name that says nothing
// ("X-Scope-OrgID: 1", "format=json") is no credential, and replacing it
// everywhere would garble every log line (each "1" in a server name).
const minSecretLen = 8

// secretWords mark a header or query parameter whose value is a credential
// however short.
var secretWords = []string{"auth", "token", "key", "secret", "pass", "cookie", "session", "credential", "sig"}

// mayBeSecret reports whether the value of the header or query parameter
// name must be kept out of errors and logs.
func mayBeSecret(name, value string) bool {
	return len(value) >= minSecretLen || secretName(name)
}

// secretName reports whether name says its value is a credential.
func secretName(name string) bool {
	name = strings.ToLower(name)
	for _, w := range secretWords {
		if strings.Contains(name, w) {
			return true
		}
	}
	return false
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}
