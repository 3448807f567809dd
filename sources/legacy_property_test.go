package sources

import (
	"math/rand/v2"
	"net/http"
	"strings"
	"testing"

	promconfig "github.com/prometheus/common/config"
)

// TestLegacyHeadersProperty: over random headers written under the old
// headers key, each is sent as written, under http_headers as a secret
// exactly when the documented rule says it may be a credential (8 or more
// characters, or a name with auth, token, key, ...), and every such value
// is hidden by the source's redactor while a plain short value is not.
func TestLegacyHeadersProperty(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	names := []string{"X-Scope-OrgID", "X-Tenant", "X-Api-Key", "X-Auth-User", "X-Session", "Cookie", "X-Sig", "X-Region", "X-Passcode"}
	word := func(n int) string {
		const letters = "abcdefghijklmnopqrstuvwxyz0123456789-"
		b := make([]byte, n)
		for i := range b {
			b[i] = letters[rng.IntN(len(letters))]
		}
		return string(b)
	}
	for range 500 {
		headers := map[string]string{}
		for range 1 + rng.IntN(4) {
			// a value of 3..12 characters around the 8 of the rule, made
			// unlikely to occur inside the text the redactor is given
			headers[names[rng.IntN(len(names))]] = "V" + word(2+rng.IntN(10))
		}
		h, err := LegacyHTTP{Headers: headers}.resolve(promconfig.DefaultHTTPClientConfig)
		if err != nil {
			t.Fatalf("%v: %v", headers, err)
		}
		secrets, _ := httpSecrets(h)
		red := newRedactor("http://graphite:8080", secrets...)
		for name, value := range headers {
			got := h.HTTPHeaders.Headers[http.CanonicalHeaderKey(name)]
			secret := len(value) >= 8 || nameSaysSecret(name)
			switch {
			case secret && (len(got.Secrets) != 1 || string(got.Secrets[0]) != value || len(got.Values) != 0):
				t.Fatalf("%s: %q is a credential by the rule, mapped to %+v", name, value, got)
			case !secret && (len(got.Values) != 1 || got.Values[0] != value || len(got.Secrets) != 0):
				t.Fatalf("%s: %q is no credential by the rule, mapped to %+v", name, value, got)
			}
			shown := red.String("reply: " + value)
			if secret == (shown != "reply: "+redacted) {
				t.Fatalf("%s: %q (credential %v) shown as %q", name, value, secret, shown)
			}
		}
	}
}

// nameSaysSecret is the documented list, spelled out independently of mayBeSecret.
func nameSaysSecret(name string) bool {
	name = strings.ToLower(name)
	for _, w := range []string{"auth", "token", "key", "secret", "pass", "cookie", "session", "credential", "sig"} {
		if strings.Contains(name, w) {
			return true
		}
	}
	return false
}
