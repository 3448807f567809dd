package config

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/haproxy-weighter/haproxy-weighter/haproxy"
	"github.com/haproxy-weighter/haproxy-weighter/internal/duration"
	"github.com/haproxy-weighter/haproxy-weighter/sources"
)

// A second YAML document used to be dropped without a word: a config built by
// concatenating files ran with only the first part.
func TestSecondDocumentRejected(t *testing.T) {
	data := "backends:\n  - name: b\n    source: {haproxy: {counter: bytes_in}}\n---\ninterval: bad\n"
	_, err := Parse("c.yml", []byte(data), noEnv)
	want := "c.yml:4: a second YAML document (after ---) is not read: keep the whole configuration in one document"
	if err == nil || err.Error() != want {
		t.Errorf("got %v, want %q", err, want)
	}
	// An empty trailing document (a stray --- at the end) changes nothing.
	if _, err := Parse("c.yml", []byte("---\nbackends:\n  - name: b\n    source: {haproxy: {counter: bytes_in}}\n---\n# end\n"), noEnv); err != nil {
		t.Errorf("trailing empty document: %v", err)
	}
}

// A backend repeated with an alias or a merge key (<<: *base) lost its source's
// defaults (server_label, timeout), so it failed or ran with a zero timeout.
func TestAliasAndMergeKeepSourceDefaults(t *testing.T) {
	data := `backends:
  - &base
    name: a
    source:
      prometheus: {url: "http://127.0.0.1:9090", query: up}
  - <<: *base
    name: b
  - name: c
    source: &src
      graphite: {url: "http://127.0.0.1:8080", target: "a.*"}
  - name: d
    source: *src
`
	c, err := Parse("c.yml", []byte(data), noEnv)
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range c.Backends {
		switch b.Source.Kind() {
		case "prometheus":
			if p := b.Source.Config().(*sources.PrometheusConfig); p.ServerLabel != "server" || p.Timeout != duration.Duration(5*time.Second) {
				t.Errorf("%s: prometheus defaults lost: %+v", b.Name, p)
			}
		case "graphite":
			if g := b.Source.Config().(*sources.GraphiteConfig); g.From != "-5min" || g.Timeout != duration.Duration(5*time.Second) || g.Retries != 2 {
				t.Errorf("%s: graphite defaults lost: %+v", b.Name, g)
			}
		default:
			t.Errorf("%s: source %q", b.Name, b.Source.Kind())
		}
	}
}

// An unclosed ${NAME (or ${NAME:-default}, which is not supported) was left in
// the value as is: a URL holding "${HG_API_KEY" only failed later, as a 401.
func TestEnvReferenceMalformed(t *testing.T) {
	env := func(k string) (string, bool) { return "v", k == "KEY" }
	base := "backends:\n  - name: b\n    source:\n      graphite: {url: \"https://%s@graphite.example\", target: \"a.*\"}\n"
	for ref, want := range map[string]string{
		"${KEY":          `c.yml:4: "${KEY@" is not a ${NAME} reference: unclosed, or a shell form like ${NAME:-default}, which is not supported`,
		"${KEY:-x}":      `c.yml:4: "${KEY:" is not a ${NAME} reference: unclosed, or a shell form like ${NAME:-default}, which is not supported`,
		"${KEY}x${KEY-}": `c.yml:4: "${KEY-" is not a ${NAME} reference: unclosed, or a shell form like ${NAME:-default}, which is not supported`,
	} {
		_, err := Parse("c.yml", []byte(strings.Replace(base, "%s", ref, 1)), env)
		if err == nil || err.Error() != want {
			t.Errorf("%s: got %v, want %q", ref, err, want)
		}
	}
	// Not references: a lone $, $NAME, and ${1} (PromQL label_replace's group syntax) stay as written.
	data := "backends:\n  - name: b\n    source:\n      prometheus: {url: \"http://x\", query: 'label_replace(up, \"server\", \"${1}$2\", \"instance\", \"(.*):$\")'}\n"
	c, err := Parse("c.yml", []byte(data), env)
	if err != nil {
		t.Fatal(err)
	}
	if q := c.Backends[0].Source.Config().(*sources.PrometheusConfig).Query; q != `label_replace(up, "server", "${1}$2", "instance", "(.*):$")` {
		t.Errorf("query %q", q)
	}
}

// Flag values are not a file: a ${...} in them (a Graphite template, a PromQL
// named group) is meant literally and must not be looked up in the environment.
func TestFromFlagsNoEnvExpansion(t *testing.T) {
	target := `template(servers.${host}.rate, host="*")`
	c, err := FromFlags(Flags{Backend: "b", Source: map[string]string{"graphite-url": "http://127.0.0.1:8080", "target": target}})
	if err != nil {
		t.Fatal(err)
	}
	if got := c.Backends[0].Source.Config().(*sources.GraphiteConfig).Target; got != target {
		t.Errorf("target %q, want %q", got, target)
	}
}

// Top-level values that decode but do not validate were reported without a
// line ("c.yml: interval: must be at least 100ms").
func TestTopLevelErrorsHaveLines(t *testing.T) {
	data := "interval: -5s\ntimeout: -1s\nhaproxy:\n  socket: \"\"\nbackends: []\n"
	_, err := Parse("c.yml", []byte(data), noEnv)
	want := `c.yml:1: interval: must be at least 100ms, got -5s
c.yml:2: timeout: must not be negative, got -1s
c.yml:5: backends: at least one backend is required`
	if err == nil || err.Error() != want {
		t.Errorf("got\n%v\nwant\n%s", err, want)
	}
	data = "haproxy:\n  socket: \"\"\nbackends:\n  - name: b\n    source: {haproxy: {counter: bytes_in}}\n"
	_, err = Parse("c.yml", []byte(data), noEnv)
	if want := "c.yml:2: haproxy: socket is required"; err == nil || err.Error() != want {
		t.Errorf("got %v, want %q", err, want)
	}
}

// Load read whatever the path gave without a bound: --config /dev/zero (or a
// log file given by mistake) grew memory until the OOM killer came.
func TestLoadRefusesHugeFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "big.yml")
	if err := os.WriteFile(path, make([]byte, maxFileSize+1), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := Load(path)
	if err == nil || !strings.Contains(err.Error(), "file too large (over 1 MiB), not a configuration file") {
		t.Errorf("got %v", err)
	}
	if _, err := Load("/dev/zero"); err == nil || err.Error() != "read config: /dev/zero: not a regular file: a character device" {
		t.Errorf("/dev/zero: got %v", err)
	}
}

// A FIFO given as the configuration blocked Load in open until something
// wrote to it: validate, run and a reload hung without a word.
func TestLoadRefusesFIFO(t *testing.T) {
	path := filepath.Join(t.TempDir(), "config.yaml")
	if err := syscall.Mkfifo(path, 0o600); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := Load(path)
		done <- err
	}()
	select {
	case err := <-done:
		if want := "read config: " + path + ": not a regular file: a named pipe (FIFO)"; err == nil || err.Error() != want {
			t.Errorf("got %v, want %q", err, want)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Load still blocked on a FIFO after 5s")
	}
}

// A tab used for indentation was reported as yaml.v3's "found character that
// cannot start any token", which does not say which character.
func TestTabIndentNamed(t *testing.T) {
	_, err := Parse("c.yml", []byte("backends:\n  - name: b\n    source:\n\t  haproxy: {counter: bytes_in}\n"), noEnv)
	want := "c.yml:4: found character that cannot start any token (a tab: indent with spaces)"
	if err == nil || err.Error() != want {
		t.Errorf("got %v, want %q", err, want)
	}
}

// The README gives "0 = no limit / off" for max_age, smoothing and timeout,
// but a bare 0 was refused as `invalid duration "0"`; only 0s was taken.
func TestBareZeroDuration(t *testing.T) {
	data := "timeout: 0\nbackends:\n  - name: b\n    source: {haproxy: {counter: bytes_in, sample_interval: 0}}\n    max_age: 0\n    smoothing: 0 # off\n"
	c, err := Parse("c.yml", []byte(data), noEnv)
	if err != nil {
		t.Fatal(err)
	}
	if b := c.Backends[0]; c.Timeout != 0 || b.MaxAge != 0 || b.Smoothing != 0 || b.Source.Config().(*haproxy.StatsConfig).SampleInterval != 0 {
		t.Errorf("timeout %s max_age %s smoothing %s", c.Timeout, b.MaxAge, b.Smoothing)
	}
	// Other numbers have no obvious unit and stay errors; interval must still be positive.
	for data, want := range map[string]string{
		"interval: 10\n":  `c.yml:1: interval: invalid duration (want e.g. 10s, 1m30s)`,
		"interval: 0\n":   `c.yml:1: interval: must be at least 100ms, got 0s`,
		"interval: 1ms\n": `c.yml:1: interval: must be at least 100ms, got 1ms`,
		"jitter: 0\nbackends:\n  - {name: b, source: {haproxy: {counter: bytes_in}}, max_weight: 0}\n": `c.yml:3: backends[0] (b): max_weight must be in 1..256, got 0`,
	} {
		if !strings.Contains(data, "backends") {
			data += "backends:\n  - name: b\n    source: {haproxy: {counter: bytes_in}}\n"
		}
		if _, err := Parse("c.yml", []byte(data), noEnv); err == nil || err.Error() != want {
			t.Errorf("%q: got %v, want %q", data, err, want)
		}
	}
}

// validate said ok for a listen address without a port or with a bad one;
// run then failed at start ("missing port in address"), and no line was named.
func TestListenAddressChecked(t *testing.T) {
	body := "backends:\n  - name: b\n    source: {haproxy: {counter: bytes_in}}\n"
	for listen, want := range map[string]string{
		`"localhost"`:       `c.yml:1: listen: "localhost" is not host:port (address localhost: missing port in address)`,
		`"127.0.0.1:99999"`: `c.yml:1: listen: "127.0.0.1:99999" is not host:port (bad port "99999")`,
	} {
		_, err := Parse("c.yml", []byte("listen: "+listen+"\n"+body), noEnv)
		if err == nil || err.Error() != want {
			t.Errorf("%s: got %v, want %q", listen, err, want)
		}
	}
	for _, ok := range []string{`""`, `":9842"`, `"[::1]:9842"`, `"127.0.0.1:0"`} {
		if _, err := Parse("c.yml", []byte("listen: "+ok+"\n"+body), noEnv); err != nil {
			t.Errorf("%s: %v", ok, err)
		}
	}
}

// TestEnvValuesKeepTheirMeaning: a variable's value is written the way its
// place in the YAML needs, so a password with YAML syntax in it arrives
// whole, and where it cannot (unquoted), loading fails at the line and says
// to quote the reference instead of silently cutting the value.
func TestEnvValuesKeepTheirMeaning(t *testing.T) {
	env := map[string]string{
		"PLAIN": "s3cr3t-key", "HASH": "pa ss #word", "QUOTES": `it's "quoted" \ here`, "COLON": "user: x",
		"COMMA": "a,b", "NEWLINE": "line1\nkey: injected", "DASH": "-5min", "TRAIL": "pw ",
	}
	lookup := func(k string) (string, bool) { v, ok := env[k]; return v, ok }
	cfg := func(password string) string {
		return "backends:\n  - name: b\n    source:\n      prometheus:\n        url: http://127.0.0.1:9090\n        query: up\n" +
			"        basic_auth:\n          username: u\n          password: " + password + "\n"
	}
	for _, tc := range []struct{ ref, want string }{
		{"${PLAIN}", "s3cr3t-key"},
		{`"${HASH}"`, "pa ss #word"},
		{`'${HASH}'`, "pa ss #word"},
		{`"${QUOTES}"`, `it's "quoted" \ here`},
		{`'${QUOTES}'`, `it's "quoted" \ here`},
		{`"${COLON}"`, "user: x"},
		{"${COMMA}", "a,b"}, // a comma is plain text outside {…}
		{"${DASH}", "-5min"},
		{`"${NEWLINE}"`, "line1\nkey: injected"},
		{"x-${PLAIN} # ${NEWLINE} in a comment is not expanded", "x-s3cr3t-key"},
	} {
		c, err := Parse("c.yml", []byte(cfg(tc.ref)), lookup)
		if assert.NoError(t, err, tc.ref) {
			assert.Equal(t, tc.want, string(c.Backends[0].Source.Config().(*sources.PrometheusConfig).HTTP.BasicAuth.Password), tc.ref)
		}
	}
	for _, ref := range []string{"${HASH}", "${COLON}", "${NEWLINE}", "${TRAIL}", `'${NEWLINE}'`} {
		_, err := Parse("c.yml", []byte(cfg(ref)), lookup)
		if assert.Error(t, err, ref) {
			assert.Contains(t, err.Error(), "c.yml:9: environment variable", ref)
			assert.Contains(t, err.Error(), "write the reference in quotes", ref)
		}
	}
	// inside a flow mapping a comma would end the value
	flow := "backends:\n  - name: b\n    source:\n      prometheus: {url: http://127.0.0.1:9090, query: up, basic_auth: {username: u, password: ${COMMA}}}\n"
	_, err := Parse("c.yml", []byte(flow), lookup)
	assert.ErrorContains(t, err, "c.yml:4: environment variable COMMA holds characters YAML reads as syntax")
}
