package cmd

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// validate said ok for a Prometheus source whose TLS ca_file does not exist;
// run and once then refused to start on the same file.
func TestValidateBuildsSources(t *testing.T) {
	path := filepath.Join(t.TempDir(), "c.yaml")
	data := "backends:\n  - name: be\n    source:\n      prometheus: {url: \"https://127.0.0.1:9090\", query: up, tls_config: {ca_file: /nonexistent/ca.pem}}\n"
	if err := os.WriteFile(path, []byte(data), 0o600); err != nil {
		t.Fatal(err)
	}
	_, _, err := execute(t, "validate", path)
	want := "invalid configuration:\n" + path + ": backend be: prometheus: unable to read CA cert: unable to read file /nonexistent/ca.pem: open /nonexistent/ca.pem: no such file or directory"
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
		path + `:7: backends[0] (be): source: prometheus: server_map: node-1: server name: character ';' is not allowed in HAProxy names (letters, digits, '.', ':', '_', '-')` + "\n" +
		path + `:8: backends[1]: name: character ' ' is not allowed in HAProxy names (letters, digits, '.', ':', '_', '-')`
	if err == nil || err.Error() != want {
		t.Errorf("got\n%v\nwant\n%s", err, want)
	}
}

// The HTTP keys of earlier releases still load; validate names each with
// its line and what replaces it, exits 0, and shows none of their values.
func TestValidateReportsDeprecatedKeys(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "c.yaml")
	data := "backends:\n  - name: be\n    source:\n      graphite:\n        url: http://127.0.0.1:8080\n        target: a.*\n" +
		"        bearer_token: tok-s3cr3t\n        headers: {X-Api-Key: hdr-s3cr3t}\n        tls: {insecure_skip_verify: true}\n"
	if err := os.WriteFile(path, []byte(data), 0o600); err != nil {
		t.Fatal(err)
	}
	out, errOut, err := execute(t, "validate", path)
	if err != nil {
		t.Fatalf("refused: %v", err)
	}
	want := path + ":7: warning: backends[0] (be): source: graphite: bearer_token: deprecated, write authorization: {credentials: ...}\n" +
		path + ":8: warning: backends[0] (be): source: graphite: headers: deprecated, write http_headers: {Name: {values: [...]}} (or secrets: or files: for a credential)\n" +
		path + ":9: warning: backends[0] (be): source: graphite: tls: deprecated, write tls_config (same keys)\n"
	if errOut != want {
		t.Errorf("stderr:\n%s\nwant:\n%s", errOut, want)
	}
	if strings.Contains(out+errOut, "s3cr3t") {
		t.Errorf("a secret shows:\n%s%s", out, errOut)
	}
}

// A web configuration file that exporter-toolkit cannot read (here: a
// password that is no bcrypt hash) fails validate, as it fails the start.
func TestValidateChecksTheWebConfig(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "c.yaml")
	data := "web_config_file: web.yml\nbackends:\n  - name: be\n    source:\n      prometheus: {url: \"http://127.0.0.1:9090\", query: up}\n"
	if err := os.WriteFile(path, []byte(data), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "web.yml"), []byte("basic_auth_users:\n  u: plain-S3cret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, _, err := execute(t, "validate", path)
	if err == nil || !strings.Contains(err.Error(), path+": web config file "+filepath.Join(dir, "web.yml")+": ") {
		t.Fatalf("got %v", err)
	}
	if strings.Contains(err.Error(), "S3cret") {
		t.Errorf("the password shows: %v", err)
	}
	if err := os.WriteFile(filepath.Join(dir, "web.yml"), []byte("basic_auth_users:\n  u: $2y$10$QOauhQNbBCuQDKes6eFzPeMqBSjb7Mr5DUmpZ/VcEd00UAV/LDeSi\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, _, err := execute(t, "validate", path); err != nil {
		t.Errorf("a valid web configuration refused: %v", err)
	}
}

// run and once log each deprecated key once per load, at WARN, whatever
// happens next (here the socket is missing and once fails).
func TestOnceLogsDeprecatedKeysOnce(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "c.yaml")
	data := "haproxy: {socket: " + filepath.Join(dir, "none.sock") + "}\nbackends:\n  - name: be\n    source:\n" +
		"      prometheus: {url: \"http://127.0.0.1:1\", query: up, bearer_token: tok-S3cret}\n"
	if err := os.WriteFile(path, []byte(data), 0o600); err != nil {
		t.Fatal(err)
	}
	_, errOut, _ := execute(t, "once", "--config", path)
	line := path + ":5: warning: backends[0] (be): source: prometheus: bearer_token: deprecated, write authorization: {credentials: ...}"
	if n := strings.Count(errOut, line); n != 1 {
		t.Errorf("the warning is logged %d times, want once:\n%s", n, errOut)
	}
	if !strings.Contains(errOut, "level=WARN") || strings.Contains(errOut, "S3cret") {
		t.Errorf("want a WARN line and no secret:\n%s", errOut)
	}
}

// run refuses to start on a web configuration file it cannot use, before
// listening; --web.config.file stands for web_config_file.
func TestRunRefusesABadWebConfig(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "c.yaml")
	data := "listen: 127.0.0.1:0\nhaproxy: {socket: " + filepath.Join(dir, "none.sock") + "}\nbackends:\n  - name: be\n    source:\n" +
		"      prometheus: {url: \"http://127.0.0.1:1\", query: up}\n"
	if err := os.WriteFile(path, []byte(data), 0o600); err != nil {
		t.Fatal(err)
	}
	bad := filepath.Join(dir, "web.yml")
	if err := os.WriteFile(bad, []byte("tls_server_config: {cert_file: missing.crt, key_file: missing.key}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, _, err := execute(t, "run", "--config", path, "--web.config.file", bad)
	if err == nil || !strings.Contains(err.Error(), "web config file "+bad+": ") || !strings.Contains(err.Error(), "missing.crt") {
		t.Fatalf("got %v", err)
	}
}
