package e2e

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/crypto/bcrypt"

	"github.com/haproxy-weighter/haproxy-weighter/internal/testenv"
)

// Secrets of the test: none may show in a log line, an error, validate's
// output or /metrics.
const (
	promUser      = "weighter"
	promPassword  = "pw-R1ght-s3cret"
	wrongPassword = "pw-Wr0ng-s3cret"
	scrapeUser    = "scraper"
	scrapePass    = "scrape-S3cret-pw"
)

var httpSecrets = []string{promPassword, wrongPassword, scrapePass,
	base64.StdEncoding.EncodeToString([]byte(promUser + ":" + promPassword)),
	base64.StdEncoding.EncodeToString([]byte(promUser + ":" + wrongPassword)),
	base64.StdEncoding.EncodeToString([]byte(scrapeUser + ":" + scrapePass))}

// tlsFiles writes testenv.TestCA's CA and certificate for 127.0.0.1 into
// dir as ca.pem, server.crt, server.key, and haproxy.pem (certificate then
// key, as HAProxy's crt takes them).
func tlsFiles(t *testing.T, dir string) (caFile string, pool *x509.CertPool) {
	t.Helper()
	files := testenv.TestCA(t)
	read := func(path string) []byte {
		t.Helper()
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		return data
	}
	caPEM, certPEM, keyPEM := read(files.CA), read(files.Cert), read(files.Key)
	for name, data := range map[string][]byte{
		"ca.pem":      caPEM,
		"server.crt":  certPEM,
		"server.key":  keyPEM,
		"haproxy.pem": append(append([]byte{}, certPEM...), keyPEM...),
	} {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	pool = x509.NewCertPool()
	if !pool.AppendCertsFromPEM(caPEM) {
		t.Fatal("the test CA's PEM holds no certificate")
	}
	return filepath.Join(dir, "ca.pem"), pool
}

// authProxy is HAProxy's configuration for a TLS frontend that asks for
// basic auth (http-request auth) in front of Prometheus, beside be_ingest.
func authProxy(t *testing.T, dir string, port int, promURL string) string {
	u, err := url.Parse(promURL)
	if err != nil {
		t.Fatal(err)
	}
	return haproxyConfig(t) + fmt.Sprintf(`
userlist prometheus_users
  user %s insecure-password %s
frontend fe_prometheus
  mode http
  timeout client 10s
  bind 127.0.0.1:%d ssl crt %s
  http-request auth realm prometheus unless { http_auth(prometheus_users) }
  default_backend be_prometheus
backend be_prometheus
  mode http
  timeout server 10s
  server prometheus %s
`, promUser, promPassword, port, filepath.Join(dir, "haproxy.pem"), u.Host)
}

// TestPrometheusBehindTLSAndBasicAuth: the Prometheus source reaches a real
// Prometheus through a real HAProxy that terminates TLS and asks for basic
// auth, with the password read from a file (relative to the configuration
// file, as in Prometheus). A wrong password is a clear error; the right one,
// written to the file, is used after SIGHUP and the weights converge. The
// daemon's own listener serves /metrics, /healthz and /readyz over TLS with
// basic auth from its web configuration file. No password shows in the
// logs, in validate's or once's output, or in /metrics.
func TestPrometheusBehindTLSAndBasicAuth(t *testing.T) {
	dir := t.TempDir()
	_, pool := tlsFiles(t, dir)
	prom := testenv.StartPrometheus(t, promData(time.Now()).String())
	proxyPort := testenv.FreePort(t)
	h := testenv.StartHAProxy(t, authProxy(t, dir, proxyPort, prom.URL))

	hash, err := bcrypt.GenerateFromPassword([]byte(scrapePass), bcrypt.MinCost)
	if err != nil {
		t.Fatal(err)
	}
	write := func(name, text string) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write("web.yml", fmt.Sprintf("tls_server_config:\n  cert_file: server.crt\n  key_file: server.key\nbasic_auth_users:\n  %s: %s\n", scrapeUser, hash))
	write("prometheus.password", wrongPassword+"\n")
	listen := fmt.Sprintf("127.0.0.1:%d", testenv.FreePort(t))
	write("config.yaml", fmt.Sprintf(`interval: 1s
listen: %s
web_config_file: web.yml
haproxy:
  socket: %s
backends:
  - name: be_ingest
    source:
      prometheus:
        url: https://127.0.0.1:%d
        query: %q
        basic_auth: {username: %s, password_file: prometheus.password}
        tls_config: {ca_file: ca.pem}
    aggregate: last
    function: limited-proportions
    limiting_factor: 4
    aggressiveness: 1
    max_step: 0
    deadband: 0
`, listen, h.Socket, proxyPort, query, promUser))
	cfg := filepath.Join(dir, "config.yaml")

	r := runCmd(t, "validate", cfg)
	if r.code != 0 {
		t.Fatalf("validate: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	testenv.AssertNoSecret(t, "validate's output", r.stdout+r.stderr, httpSecrets...)

	r = runCmd(t, "once", "--config", cfg)
	if r.code == 0 || !strings.Contains(r.stderr, "401 Unauthorized") {
		t.Fatalf("once with the wrong password: exit %d, want a failure naming HAProxy's 401\n%s%s", r.code, r.stdout, r.stderr)
	}
	testenv.AssertNoSecret(t, "once's output", r.stdout+r.stderr, httpSecrets...)

	d := startDaemon(t, listen, "--config", cfg)
	web := &webClient{t: t, base: "https://" + listen,
		client: &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}}
	srcErr := `haproxy_weighter_cycles_total{backend="be_ingest",result="source_error"}`
	testenv.WaitWithin(t, 20*time.Second, "the wrong password counted as a source error", func() bool { return web.metric(srcErr) >= 1 })
	testenv.WaitWithin(t, 5*time.Second, "the 401 in the daemon's log", func() bool {
		return strings.Contains(d.logs.String(), "401 Unauthorized")
	})
	if got := testenv.Weights(t, h.Socket, "be_ingest"); !maps.Equal(got, initial) {
		t.Errorf("weights changed without data: %v", got)
	}

	write("prometheus.password", promPassword+"\n")
	_ = d.cmd.Process.Signal(syscall.SIGHUP)
	testenv.WaitWithin(t, 20*time.Second, "weights converge with the password from the file", func() bool {
		return maps.Equal(testenv.Weights(t, h.Socket, "be_ingest"), want)
	})
	if v := web.metric("haproxy_weighter_config_reload_success"); v != 1 {
		t.Errorf("config_reload_success = %v after SIGHUP", v)
	}
	testenv.WaitWithin(t, 10*time.Second, "ready", func() bool { return web.status("/readyz", scrapeUser, scrapePass) == http.StatusOK })

	// The listener: TLS and basic auth on every path.
	for _, path := range []string{"/metrics", "/healthz", "/readyz"} {
		if c := web.status(path, scrapeUser, scrapePass); c != http.StatusOK {
			t.Errorf("%s with the right credentials: %d", path, c)
		}
		if c := web.status(path, "", ""); c != http.StatusUnauthorized {
			t.Errorf("%s without credentials: %d, want 401", path, c)
		}
		if c := web.status(path, scrapeUser, "wrong"); c != http.StatusUnauthorized {
			t.Errorf("%s with a wrong password: %d, want 401", path, c)
		}
	}
	if c, body := d.get("/metrics"); c == http.StatusOK || strings.Contains(body, "haproxy_weighter_") {
		t.Errorf("plain HTTP to the TLS listener answered %d with metrics", c)
	}
	untrusted := &http.Client{Timeout: 5 * time.Second}
	if resp, err := untrusted.Get(web.base + "/metrics"); err == nil {
		resp.Body.Close()
		t.Errorf("a client that does not trust the CA got %d", resp.StatusCode)
	}

	_, metrics := web.get("/metrics", scrapeUser, scrapePass)
	testenv.AssertNoSecret(t, "/metrics", metrics, httpSecrets...)
	if code := d.stop(); code != 0 {
		t.Errorf("exit code %d after SIGTERM", code)
	}
	testenv.AssertNoSecret(t, "the daemon's log", d.logs.String(), httpSecrets...)
}

// webClient talks to the daemon's listener over TLS with basic auth.
type webClient struct {
	t      *testing.T
	base   string
	client *http.Client
}

func (w *webClient) get(path, user, pass string) (int, string) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, w.base+path, nil)
	if err != nil {
		w.t.Fatal(err)
	}
	if user != "" {
		req.SetBasicAuth(user, pass)
	}
	resp, err := w.client.Do(req)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}

func (w *webClient) status(path, user, pass string) int {
	c, _ := w.get(path, user, pass)
	return c
}

// metric is one exact series of /metrics, or -1 if absent.
func (w *webClient) metric(series string) float64 {
	code, body := w.get("/metrics", scrapeUser, scrapePass)
	if code != http.StatusOK {
		return -1
	}
	for _, line := range strings.Split(body, "\n") {
		if v, ok := strings.CutPrefix(line, series+" "); ok {
			if f, err := strconv.ParseFloat(v, 64); err == nil {
				return f
			}
		}
	}
	return -1
}
