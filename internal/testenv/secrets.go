package testenv

import (
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"
)

// AssertNoSecret fails the test, without stopping it, for each of secrets
// that text contains, saying where (what) and showing the text around the
// first one: a leak is found in a whole log without printing all of it.
func AssertNoSecret(t testing.TB, what, text string, secrets ...string) {
	t.Helper()
	for _, s := range secrets {
		if strings.Contains(text, s) {
			t.Errorf("%s shows the secret %q:\n%s", what, s, Excerpt(text, s))
		}
	}
}

// Excerpt is the part of text around the first s (200 bytes before, 100
// after), or "" when text has no s.
func Excerpt(text, s string) string {
	i := strings.Index(text, s)
	if i < 0 {
		return ""
	}
	return text[max(0, i-200):min(len(text), i+len(s)+100)]
}

// EchoingProxy is a Prometheus or Graphite, or a proxy in front of one, that
// answers 502 with a body quoting what it was sent: the Authorization
// header, the URL with the Basic credentials it decoded put back in, those
// credentials decoded, X-Api-Key, and then every header. It quotes them
// first, so that they fall within the snippet an error shows. It is the
// fault a secret-redaction test injects: nothing real answers like this on
// demand.
func EchoingProxy(w http.ResponseWriter, r *http.Request) {
	u := url.URL{Scheme: "http", Host: r.Host, Path: r.URL.Path, RawQuery: r.URL.RawQuery}
	decoded := ""
	if user, pass, ok := r.BasicAuth(); ok {
		u.User = url.UserPassword(user, pass)
		decoded = user + ":" + pass
	}
	w.Header().Set("Content-Type", "text/html")
	w.WriteHeader(http.StatusBadGateway)
	fmt.Fprintf(w, "<html>502 Bad Gateway: auth=%s url=%s decoded=%s raw=%s", r.Header.Get("Authorization"),
		u.String(), decoded, r.Header.Get("X-Api-Key"))
	for k, v := range r.Header {
		fmt.Fprintf(w, " %s=%s", k, strings.Join(v, ","))
	}
	fmt.Fprint(w, "</html>")
}
