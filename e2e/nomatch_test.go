package e2e

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/haproxy-weighter/haproxy-weighter/internal/testenv"
)

// TestOnceNoSeriesMatchesAServer: a query whose server label values are not
// HAProxy's server names (another naming scheme, a missing server_regex) must
// make once exit 1 naming both sides, not print a held plan and exit 0.
func TestOnceNoSeriesMatchesAServer(t *testing.T) {
	h := testenv.StartHAProxy(t, testenv.HAProxyDefaults+fmt.Sprintf(`
backend be
  balance roundrobin
  server s1 127.0.0.1:%d weight 10
  server s2 127.0.0.1:%d weight 10
`, testenv.FreePort(t), testenv.FreePort(t)))
	prom := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"status":"success","data":{"resultType":"vector","result":[
			{"metric":{"server":"web-1.example:9100"},"value":[1700000000,"1"]},
			{"metric":{"server":"web-2.example:9100"},"value":[1700000000,"2"]}]}}`)
	}))
	t.Cleanup(prom.Close)
	r := runCmd(t, "once", "--socket", h.Socket, "--backend", "be", "--prometheus-url", prom.URL,
		"--query", "load", "--server-label", "server")
	if r.code != 1 {
		t.Fatalf("exit %d, want 1\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	want := `no series name matches a server of the backend: 2 came back, such as "web-1.example:9100", "web-2.example:9100"; ` +
		`the backend's 2 servers are "s1", "s2"`
	if !strings.Contains(r.stderr, want) {
		t.Errorf("stderr lacks %s:\n%s", want, r.stderr)
	}
}
