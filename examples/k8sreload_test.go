package examples

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/haproxy-weighter/haproxy-weighter/internal/testenv"
)

// kubeletWrite lays out files in dir as the kubelet's atomic writer does for a ConfigMap
// volume: the files go to a new timestamped directory, a `..data_tmp` symlink to it is renamed
// over `..data`, the old directory is removed, and each file name is a symlink into `..data`.
func kubeletWrite(t *testing.T, dir, stamp string, files map[string]string) {
	t.Helper()
	ts := "..2026_12_01_23_00_" + stamp
	must(t, os.Mkdir(filepath.Join(dir, ts), 0o755))
	for name, text := range files {
		writeFile(t, filepath.Join(dir, ts, name), text)
	}
	old, _ := os.Readlink(filepath.Join(dir, "..data"))
	must(t, os.Symlink(ts, filepath.Join(dir, "..data_tmp")))
	must(t, os.Rename(filepath.Join(dir, "..data_tmp"), filepath.Join(dir, "..data")))
	for name := range files {
		if _, err := os.Lstat(filepath.Join(dir, name)); os.IsNotExist(err) {
			must(t, os.Symlink(filepath.Join("..data", name), filepath.Join(dir, name)))
		}
	}
	if old != "" {
		must(t, os.RemoveAll(filepath.Join(dir, old)))
	}
}

// TestConfigMapReloadThroughDataSymlink: the Kubernetes example mounts the config as a
// ConfigMap directory so that an edit reaches the daemon; this checks that the real daemon,
// given the kubelet's layout, reads the swapped-in config at SIGHUP and not the old one.
func TestConfigMapReloadThroughDataSymlink(t *testing.T) {
	t.Parallel()
	sink := testenv.StartDiscardServer(t)
	h := testenv.StartHAProxy(t, testenv.HAProxyDefaults+`
backend be_a
  balance leastconn
  server s1 `+sink+`
  server s2 `+sink+`
backend be_b
  balance leastconn
  server s1 `+sink+`
  server s2 `+sink+`
`)
	listen := "127.0.0.1:" + itoa(testenv.FreePort(t))
	config := func(backends ...string) string {
		s := "listen: " + listen + "\nhaproxy: {socket: " + h.Socket + "}\nbackends:\n"
		for _, b := range backends {
			s += "  - name: " + b + "\n    source: {haproxy: {counter: current_sessions}}\n"
		}
		return s
	}
	dir := t.TempDir()
	kubeletWrite(t, dir, "00.000000001", map[string]string{"config.yaml": config("be_a")})

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, weighterBinary(t), "run", "--log-format", "json", "--config", filepath.Join(dir, "config.yaml"))
	var logs testenv.SyncBuffer
	cmd.Stdout, cmd.Stderr = &logs, &logs
	must(t, cmd.Start())
	defer func() {
		cancel()
		_ = cmd.Wait()
	}()
	// The SIGHUP handler is in place once the daemon serves: before, SIGHUP would kill it.
	deadline := time.Now().Add(15 * time.Second)
	for {
		resp, err := http.Get("http://" + listen + "/healthz")
		if err == nil {
			resp.Body.Close()
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("daemon not serving: %v\nlogs:\n%s", err, logs.String())
		}
		time.Sleep(100 * time.Millisecond)
	}

	kubeletWrite(t, dir, "30.000000002", map[string]string{"config.yaml": config("be_a", "be_b")})
	must(t, cmd.Process.Signal(syscall.SIGHUP))
	deadline = time.Now().Add(20 * time.Second)
	for {
		switch reloaded := reloadedBackends(logs.String()); {
		case reloaded == 2:
			return
		case reloaded >= 0:
			t.Fatalf("the reload read %d backends, want the new config's 2\nlogs:\n%s", reloaded, logs.String())
		}
		if time.Now().After(deadline) {
			t.Fatalf("no reload logged after SIGHUP\nlogs:\n%s", logs.String())
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// reloadedBackends returns the backend count of the first "config reloaded" line of the
// daemon's JSON logs, or -1 if there is none yet.
func reloadedBackends(logs string) int {
	sc := bufio.NewScanner(strings.NewReader(logs))
	for sc.Scan() {
		var line struct {
			Msg      string `json:"msg"`
			Backends *int   `json:"backends"`
		}
		if json.Unmarshal(sc.Bytes(), &line) == nil && line.Msg == "config reloaded" && line.Backends != nil {
			return *line.Backends
		}
	}
	return -1
}
