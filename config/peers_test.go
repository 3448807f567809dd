package config

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestPeersChecked(t *testing.T) {
	body := "backends:\n  - name: b\n    source: {haproxy: {counter: bytes_in}}\n"
	cfg, err := Parse("c.yml", []byte("listen: \":9842\"\npeers: [\"http://lb2:9842\", \"https://[2001:db8::2]:9842\"]\n"+body), noEnv)
	require.NoError(t, err)
	assert.Equal(t, []string{"http://lb2:9842", "https://[2001:db8::2]:9842"}, cfg.Peers)
	for peers, want := range map[string]string{
		`["lb2:9842"]`:                   `c.yml:2: peers: "lb2:9842": want http://host:port`,
		`["http://lb2:9842", "ftp://x"]`: `c.yml:2: peers: "ftp://x": want http://host:port`,
		`["http:///metrics"]`:            `no host`,
		`["http://lb2:9842?x=1"]`:        `no user, query or fragment`,
		`["http://a:1", "http://a:1"]`:   `c.yml:2: peers: "http://a:1" is listed twice`,
	} {
		_, err := Parse("c.yml", []byte("listen: \":9842\"\npeers: "+peers+"\n"+body), noEnv)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: got %v, want %q in it", peers, err, want)
		}
	}
	// A password written into a peer's URL is never shown.
	for _, peer := range []string{"http://u:s3cretPW@lb2:9842", "http://u:s3cretPW@lb2:bad", "http://u:s3cretPW@lb2:9842/%zz"} {
		_, err := Parse("c.yml", []byte("listen: \":9842\"\npeers: [\""+peer+"\"]\n"+body), noEnv)
		require.Error(t, err, peer)
		assert.Contains(t, err.Error(), "c.yml:2: peers: ", peer)
		assert.NotContains(t, err.Error(), "s3cretPW", peer)
	}
	_, err = Parse("c.yml", []byte("listen: \"\"\npeers: [\"http://a:1\"]\n"+body), noEnv)
	require.Error(t, err)
	assert.Contains(t, err.Error(), `c.yml:2: peers: need listen`)
}
