package sources

import (
	"errors"
	"net/url"
	"strings"
	"testing"

	promconfig "github.com/prometheus/common/config"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestRedactorURL(t *testing.T) {
	raw := "https://key-as-user:pw@www.hostedgraphite.com/d2b0c1a3/0f1e2d3c-4b5a-6978-8899-aabbccddeeff/graphite?access_key=abc%2F1"
	r := newRedactor(raw)
	u, _ := url.Parse(raw)
	assert.Equal(t, "https://www.hostedgraphite.com/d2b0c1a3/REDACTED/graphite?access_key=REDACTED", r.URL(u))
	assert.Equal(t, "REDACTED and REDACTED", r.String("key-as-user and abc/1"))
}

func TestRedactorKeepsErrorChain(t *testing.T) {
	r := newRedactor("http://h", "tok")
	err := r.Error(&Error{Kind: ErrUnreachable, Err: errors.New("bearer tok refused")})
	assert.ErrorIs(t, err, ErrUnreachable)
	assert.NotContains(t, err.Error(), "tok ")
	assert.Nil(t, r.Error(nil))
}

// A secret cut in half by truncation must not leave its first half behind.
func TestSnippetRedactsBeforeCutting(t *testing.T) {
	secret := "s3cr3t-0123456789-abcdefghij"
	r := newRedactor("http://h", secret)
	body := strings.Repeat("x", 290) + secret
	got := snippet(r, []byte(body))
	assert.NotContains(t, got, secret[:8])
}

func TestLooksLikeKey(t *testing.T) {
	for seg, want := range map[string]bool{
		"graphite": false, "render": false, "d2b0c1a3": false, "api-v1-prometheus": false,
		"0f1e2d3c-4b5a-6978-8899-aabbccddeeff": true, "a1b2c3d4e5f6a7b8": true,
	} {
		assert.Equal(t, want, looksLikeKey(seg), seg)
	}
}

// TestShortPlainHeaderIsNotASecret: a short value under a plain header name
// ("X-Scope-OrgID: 1") must not turn every "1" of every log line into
// REDACTED, while a short value under a credential's name, and any long
// value, stay hidden.
func TestShortPlainHeaderIsNotASecret(t *testing.T) {
	legacy := LegacyHTTP{Headers: map[string]string{"X-Scope-OrgID": "1", "X-Auth": "pw1", "X-Tenant": "a-long-tenant-id"}}
	h, err := legacy.resolve(promconfig.DefaultHTTPClientConfig)
	require.NoError(t, err)
	secrets, _ := httpSecrets(h)
	r := newRedactor("http://graphite:8080/render?format=json&apikey=k9", secrets...)
	got := r.String("server web-1 (weight 1) format json; pw1 k9 a-long-tenant-id")
	assert.Equal(t, "server web-1 (weight 1) format json; REDACTED REDACTED REDACTED", got)
}
