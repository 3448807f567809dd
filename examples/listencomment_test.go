package examples

import (
	"context"
	"net/http"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/haproxy-weighter/haproxy-weighter/internal/testenv"
)

var (
	listenCommentRe = regexp.MustCompile(`(?m)^\s*listen:[^#\n]*#(.*)$`)
	endpointRe      = regexp.MustCompile("(?:^|[\\s,(`])(/[a-z0-9/_.-]*)")
)

// TestExampleListenCommentsNameServedEndpoints: the endpoints an example config's comment on
// its listen line names are ones the daemon serves (asked of the real binary: not 404).
func TestExampleListenCommentsNameServedEndpoints(t *testing.T) {
	t.Parallel()
	named := map[string][]string{} // endpoint -> configs naming it
	for name, text := range exampleConfigs(t) {
		for _, m := range listenCommentRe.FindAllStringSubmatch(string(text), -1) {
			for _, e := range endpointRe.FindAllStringSubmatch(m[1], -1) {
				if !slices.Contains(named[e[1]], name) {
					named[e[1]] = append(named[e[1]], name)
				}
			}
		}
	}
	if len(named) == 0 {
		t.Fatal("no endpoint named in a listen comment: the parsing is broken")
	}

	h := startAppHAProxy(t)
	listen := "127.0.0.1:" + itoa(testenv.FreePort(t))
	cfg := filepath.Join(t.TempDir(), "config.yaml")
	writeFile(t, cfg, "listen: "+listen+"\nhaproxy: {socket: "+h.Socket+"}\nbackends:\n  - name: be_app\n    source: {haproxy: {counter: bytes_in}}\n")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, weighterBinary(t), "run", "--config", cfg)
	logs := startLogged(t, cmd)
	defer func() {
		cancel()
		_ = cmd.Wait()
	}()
	status := func(path string) int {
		deadline := time.Now().Add(15 * time.Second)
		for {
			resp, err := http.Get("http://" + listen + path)
			if err == nil {
				resp.Body.Close()
				return resp.StatusCode
			}
			if time.Now().After(deadline) {
				t.Fatalf("GET %s: %v\nlogs:\n%s", path, err, logs.String())
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	if code := status("/no-such-endpoint"); code != http.StatusNotFound {
		t.Fatalf("an unknown path answers %d, not 404: this test cannot tell what is served", code)
	}
	for endpoint, configs := range named {
		if code := status(endpoint); code == http.StatusNotFound {
			slices.Sort(configs)
			t.Errorf("%s: the listen comment names %s, which the daemon does not serve (404)", strings.Join(configs, ", "), endpoint)
		}
	}
}
