package sources

import (
	"encoding/base64"
	"net/http"
	"net/url"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"unicode"
)

// redacted replaces every secret in messages, URLs and logs.
const redacted = "REDACTED"

// redactor removes known secrets from text. Secrets come from the configuration
// (passwords, tokens, header values), from the URL (user info, query values,
// key-like path segments such as a Hosted Graphite API key) and from what the
// client sent (noteSent): a reply may quote any of them.
type redactor struct {
	secrets []string // longest first, so a secret containing another is removed whole
	// current, if set, returns the secrets read from files as they are now
	// (the client reads them at each request, so they may have changed).
	current func() []string

	mu    sync.Mutex // guards files and sent, and orders the stores to all
	files []string   // what current returned at the last refresh
	sent  []string   // credentials seen on requests, newest last (noteSent)
	// all is secrets, files and sent with their forms, read by String.
	all atomic.Pointer[[]string]
}

// maxSent bounds the credentials remembered from requests: an OAuth2 access
// token changes at each renewal, and only the recent ones can be echoed.
const maxSent = 16

// refresh reads the secret files again; a source calls it after each
// request, before anything of the reply is shown. Once per fetch rather than
// at each String: a fetch may log hundreds of series names.
func (r *redactor) refresh() {
	if r.current == nil {
		return
	}
	files := r.current()
	r.mu.Lock()
	defer r.mu.Unlock()
	r.files = files
	r.rebuild()
}

// noteSent adds the credentials of a request's headers, as the client sent
// them, to the secrets: whatever their origin (the URL's user info that
// net/http turns into a Basic header, basic_auth, authorization, an OAuth2
// access token no configuration holds, a header), what went on the wire is
// what an echoing server can quote back.
func (r *redactor) noteSent(h http.Header) {
	creds := sentCredentials(h)
	if len(creds) == 0 {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	changed := false
	for _, c := range creds {
		if !slices.Contains(r.sent, c) && !slices.Contains(r.secrets, c) {
			r.sent = append(r.sent, c)
			changed = true
		}
	}
	if !changed {
		return
	}
	if n := len(r.sent); n > maxSent {
		r.sent = slices.Clone(r.sent[n-maxSent:])
	}
	r.rebuild()
}

// noteTransport hands the credentials of each request, as it went out, to
// red before the reply is read. It sits outside prometheus/common's round
// trippers, which add basic_auth, authorization, oauth2 and http_headers to
// a copy of the request: the copy sent is the response's Request, and the
// one net/http filled from the URL's user info is the request it is given.
type noteTransport struct {
	next http.RoundTripper
	red  *redactor
}

func (t *noteTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	t.red.noteSent(req.Header)
	resp, err := t.next.RoundTrip(req)
	if resp != nil && resp.Request != nil {
		t.red.noteSent(resp.Request.Header)
	}
	return resp, err
}

// CloseIdleConnections lets http.Client.CloseIdleConnections reach the transport.
func (t *noteTransport) CloseIdleConnections() { closeIdle(t.next) }

// rebuild stores the secrets with what the files and the requests added, in
// all their forms. r.mu is held.
func (r *redactor) rebuild() {
	now := &redactor{secrets: slices.Clone(r.secrets)}
	for _, sec := range r.files {
		now.add(sec)
	}
	for _, sec := range r.sent {
		now.add(sec)
	}
	r.all.Store(&now.secrets)
}

// sentCredentials are the credentials in a request's headers: those of
// Authorization and Proxy-Authorization (authForms), and the values of
// headers whose name says they are credentials.
func sentCredentials(h http.Header) []string {
	var out []string
	for name, vs := range h {
		switch name {
		case "Authorization", "Proxy-Authorization":
			for _, v := range vs {
				out = append(out, authForms(v)...)
			}
		default:
			if secretName(name) {
				out = append(out, vs...)
			}
		}
	}
	return slices.DeleteFunc(out, func(s string) bool { return s == "" })
}

// authForms are the ways an Authorization value may be quoted: the
// credential after its scheme (the scheme stays readable: "Bearer REDACTED"
// tells which authentication went out), and for Basic the decoded user:pass
// and password. A value without a scheme is a credential whole.
func authForms(v string) []string {
	scheme, cred, ok := strings.Cut(strings.TrimSpace(v), " ")
	if !ok {
		return []string{v}
	}
	cred = strings.TrimSpace(cred)
	out := []string{cred}
	if !strings.EqualFold(scheme, "Basic") {
		return out
	}
	raw, err := base64.StdEncoding.DecodeString(cred)
	if err != nil {
		return out
	}
	if _, pass, ok := strings.Cut(string(raw), ":"); ok {
		out = append(out, string(raw), pass)
	}
	return out
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

// addURL registers the URL's secrets. Its user info is a credential as
// basic_auth's is: net/http sends it as a Basic header, which a server may
// quote back, so the token goes in with the user name and password, and so
// does the user info as the URL writes it (escaped).
func (r *redactor) addURL(u *url.URL) {
	if u.User != nil {
		user := u.User.Username()
		pass, _ := u.User.Password()
		r.add(user)
		r.add(pass)
		r.addBasic(user, pass)
		r.add(u.User.String())
		if _, escaped, ok := strings.Cut(u.User.String(), ":"); ok {
			r.add(escaped)
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

// addBasic registers what a Basic credential shows of a password: the
// user:pass it encodes and the base64 token sent in the header.
func (r *redactor) addBasic(user, pass string) {
	if user == "" && pass == "" {
		return
	}
	if pass != "" {
		r.add(user + ":" + pass)
	}
	r.add(basicToken(user, pass))
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
