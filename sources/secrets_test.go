package sources

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"log"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	promconfig "github.com/prometheus/common/config"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/haproxy-weighter/haproxy-weighter/internal/duration"
	"github.com/haproxy-weighter/haproxy-weighter/internal/testenv"
	"github.com/haproxy-weighter/haproxy-weighter/weighter"
)

// Secrets put in the configuration; none may show in an error or a log line.
const (
	secretPassword = "pw-s3cr3t-basic"
	secretBearer   = "tok-s3cr3t-bearer"
	secretHeader   = "hdr-s3cr3t-value"
	secretPathKey  = "0f1e2d3c-4b5a-6978-8899-aabbccddeeff" // Hosted Graphite style
	secretQueryKey = "qk-s3cr3t-query"
)

var allSecrets = []string{secretPassword, secretBearer, secretHeader, secretPathKey, secretQueryKey,
	base64.StdEncoding.EncodeToString([]byte("user:" + secretPassword))}

// echo is what a faulty server sends back: the whole request, credentials included.
func echo(r *http.Request) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s %s", r.Method, r.URL.String())
	for k, v := range r.Header {
		fmt.Fprintf(&b, " %s=%s", k, strings.Join(v, ","))
	}
	return b.String()
}

// faults answers each request according to the mode, always echoing what it got.
// A hanging handler returns when release closes (the test's end), so the server can close.
func faults(mode string, release <-chan struct{}) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		e := echo(r)
		switch mode {
		case "hang":
			<-release
		case "400":
			http.Error(w, "bad target: "+e, http.StatusBadRequest)
		case "500":
			http.Error(w, "<html>traceback "+e+"</html>", http.StatusInternalServerError)
		case "garbage":
			fmt.Fprint(w, "not json "+e)
		case "graphite-empty":
			fmt.Fprint(w, "[]")
		case "graphite-echo-target": // a series named after the request, which no rule places
			body, _ := json.Marshal([]map[string]any{{"target": e, "datapoints": [][2]any{{1.0, 1700000000}}}})
			w.Write(body)
		case "prom-bad-data":
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusBadRequest)
			json.NewEncoder(w).Encode(map[string]any{"status": "error", "errorType": "bad_data", "error": "parse error: " + e})
		case "prom-empty-warn":
			w.Header().Set("Content-Type", "application/json")
			json.NewEncoder(w).Encode(map[string]any{"status": "success", "warnings": []string{"warn " + e},
				"data": map[string]any{"resultType": "vector", "result": []any{
					map[string]any{"metric": map[string]string{"server": e}, "value": []any{1700000000, "NaN"}}}}})
		}
	}
}

// secretURL puts an API key in the path and in the query string.
func secretURL(base string) string {
	return base + "/acct/" + secretPathKey + "/graphite?api_key=" + secretQueryKey
}

// fetcher builds a source against url with the given auth; the log goes to logs.
type fetcher func(t *testing.T, url string, bearer bool, logs *bytes.Buffer) weighter.Source

func graphiteFetcher(t *testing.T, url string, bearer bool, logs *bytes.Buffer) weighter.Source {
	cfg := DefaultGraphiteConfig()
	cfg.URL, cfg.Target, cfg.Retries, cfg.Timeout = url, "tcp.*.rx", 1, duration.Duration(300*time.Millisecond)
	cfg.ServerRegex = `^tcp\.(node-\d+)\.rx$`
	cfg.Legacy.Headers = map[string]string{"X-Api-Key": secretHeader}
	if bearer {
		cfg.HTTP.BearerToken = secretBearer
	} else {
		cfg.HTTP.BasicAuth = &promconfig.BasicAuth{Username: "user", PasswordFile: secretFile(t, secretPassword)}
	}
	g, err := NewGraphite(cfg, slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug})))
	require.NoError(t, err)
	return g
}

func prometheusFetcher(t *testing.T, url string, bearer bool, logs *bytes.Buffer) weighter.Source {
	cfg := DefaultPrometheusConfig()
	cfg.URL, cfg.Query, cfg.Timeout = url, "up", duration.Duration(300*time.Millisecond)
	cfg.HTTP.HTTPHeaders = &promconfig.Headers{Headers: map[string]promconfig.Header{"X-Api-Key": {Secrets: []promconfig.Secret{secretHeader}}}}
	if bearer {
		cfg.HTTP.Authorization = &promconfig.Authorization{CredentialsFile: secretFile(t, secretBearer)}
	} else {
		cfg.HTTP.BasicAuth = basicAuth("user", secretPassword)
	}
	p, err := NewPrometheus(cfg, slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug})))
	require.NoError(t, err)
	return p
}

// secretFile writes secret to a file, with the trailing newline an editor leaves.
func secretFile(t *testing.T, secret string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "secret")
	require.NoError(t, os.WriteFile(path, []byte(secret+"\n"), 0o600))
	return path
}

func TestSecretsNeverLeak(t *testing.T) {
	closed := httptest.NewServer(http.NotFoundHandler())
	closedURL := closed.URL
	closed.Close()
	cases := []struct {
		source string
		make   fetcher
		mode   string
		kind   error
	}{
		{"graphite", graphiteFetcher, "down", ErrUnreachable},
		{"graphite", graphiteFetcher, "tls", ErrUnreachable},
		{"graphite", graphiteFetcher, "hang", ErrUnreachable},
		{"graphite", graphiteFetcher, "400", ErrQuery},
		{"graphite", graphiteFetcher, "500", ErrBadReply},
		{"graphite", graphiteFetcher, "garbage", ErrBadReply},
		{"graphite", graphiteFetcher, "graphite-empty", ErrNoData},
		{"graphite", graphiteFetcher, "graphite-echo-target", ErrNoData},
		{"prometheus", prometheusFetcher, "down", ErrUnreachable},
		{"prometheus", prometheusFetcher, "tls", ErrUnreachable},
		{"prometheus", prometheusFetcher, "hang", ErrUnreachable},
		{"prometheus", prometheusFetcher, "prom-bad-data", ErrQuery},
		{"prometheus", prometheusFetcher, "500", ErrBadReply},
		{"prometheus", prometheusFetcher, "garbage", ErrBadReply},
		{"prometheus", prometheusFetcher, "prom-empty-warn", ErrNoData},
	}
	for _, c := range cases {
		for _, bearer := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/%s/bearer=%v", c.source, c.mode, bearer), func(t *testing.T) {
				base := closedURL
				release := make(chan struct{})
				switch c.mode {
				case "down":
				case "tls":
					srv := httptest.NewUnstartedServer(faults("400", release))
					srv.Config.ErrorLog = log.New(io.Discard, "", 0) // handshake failures are the point
					srv.StartTLS()                                   // its certificate is not trusted
					t.Cleanup(srv.Close)
					base = srv.URL
				default:
					srv := httptest.NewServer(faults(c.mode, release))
					t.Cleanup(srv.Close)
					t.Cleanup(func() { close(release) }) // runs first: cleanups are LIFO
					base = srv.URL
				}
				var logs bytes.Buffer
				src := c.make(t, secretURL(base), bearer, &logs)
				_, err := src.Fetch(context.Background(), nil)
				require.Error(t, err)
				assert.ErrorIs(t, err, c.kind)
				assert.Contains(t, err.Error(), "REDACTED", "the URL is shown, its key redacted")
				testenv.AssertNoSecret(t, "error", err.Error(), allSecrets...)
				testenv.AssertNoSecret(t, "log", logs.String(), allSecrets...)
				if c.mode == "prom-empty-warn" {
					assert.Contains(t, logs.String(), `msg="query warnings"`)
					assert.Contains(t, logs.String(), "no valid point")
				}
			})
		}
	}
}
