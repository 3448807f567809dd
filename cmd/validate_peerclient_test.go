package cmd

import (
	"os"
	"path/filepath"
	"testing"
)

// validate builds the peers' client as run does: a peer_client CA file
// that cannot be read is refused here, not found at every ask.
func TestValidateBuildsThePeerClient(t *testing.T) {
	path := filepath.Join(t.TempDir(), "c.yaml")
	data := "listen: \":9842\"\npeers: [\"https://lb2:9842\"]\npeer_client: {tls_config: {ca_file: /nonexistent/ca.pem}}\n" +
		"backends:\n  - name: be\n    source: {haproxy: {counter: bytes_in}}\n"
	if err := os.WriteFile(path, []byte(data), 0o600); err != nil {
		t.Fatal(err)
	}
	_, _, err := execute(t, "validate", path)
	want := "invalid configuration:\n" + path + ": peer https://lb2:9842: client: peer_client: unable to read CA cert: unable to read file /nonexistent/ca.pem: open /nonexistent/ca.pem: no such file or directory"
	if err == nil || err.Error() != want {
		t.Errorf("got %v, want %q", err, want)
	}
}
