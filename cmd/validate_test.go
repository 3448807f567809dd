package cmd

import (
	"os"
	"path/filepath"
	"testing"
)

// validate said ok for a Prometheus source whose TLS ca_file does not exist;
// run and once then refused to start on the same file.
func TestValidateBuildsSources(t *testing.T) {
	path := filepath.Join(t.TempDir(), "c.yaml")
	data := "backends:\n  - name: be\n    source:\n      prometheus: {url: \"https://127.0.0.1:9090\", query: up, tls: {ca_file: /nonexistent/ca.pem}}\n"
	if err := os.WriteFile(path, []byte(data), 0o600); err != nil {
		t.Fatal(err)
	}
	_, _, err := execute(t, "validate", path)
	want := "invalid configuration:\n" + path + ": backend be: prometheus: tls: ca_file: open /nonexistent/ca.pem: no such file or directory"
	if err == nil || err.Error() != want {
		t.Errorf("got %v, want %q", err, want)
	}
	if _, _, err := execute(t, "validate", "../examples/config/prometheus.yaml"); err != nil {
		t.Errorf("example: %v", err)
	}
}

// validate said ok for a backend name that the runtime socket cannot carry;
// run then failed it at every cycle. It is refused at its line.
func TestValidateRefusesUnsendableNames(t *testing.T) {
	path := filepath.Join(t.TempDir(), "c.yaml")
	data := "backends:\n  - name: be\n    source:\n      prometheus:\n        url: http://127.0.0.1:9090\n        query: up\n" +
		"        server_map: {node-1: \"s1;shutdown sessions server be/s2\"}\n" +
		"  - name: \"be 2\"\n    source: {haproxy: {counter: bytes_in}}\n"
	if err := os.WriteFile(path, []byte(data), 0o600); err != nil {
		t.Fatal(err)
	}
	_, _, err := execute(t, "validate", path)
	want := "invalid configuration:\n" +
		path + `:7: backends[0] (be): source: prometheus: server_map: node-1: server name "s1;shutdown sessions server be/s2": character ';' is not allowed in HAProxy names (letters, digits, '.', ':', '_', '-')` + "\n" +
		path + `:8: backends[1] ("be 2"): name: character ' ' is not allowed in HAProxy names (letters, digits, '.', ':', '_', '-')`
	if err == nil || err.Error() != want {
		t.Errorf("got\n%v\nwant\n%s", err, want)
	}
}
