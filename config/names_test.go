package config

import (
	"strings"
	"testing"
)

// validate said ok for an HAProxy backend name or a server_map server name
// that the runtime socket cannot carry (a space, ';', a line break); run then
// failed every cycle. Both are refused at their line. IPVS backends' names
// are labels, never sent to HAProxy, and their server_map names IPVS servers.
func TestNamesHAProxyCannotTakeRefused(t *testing.T) {
	for _, tc := range []struct{ yaml, want string }{
		{"backends:\n  - name: be ingest\n    source: {haproxy: {counter: bytes_in}}\n",
			`c.yml:2: backends[0]: name: character ' ' is not allowed in HAProxy names (letters, digits, '.', ':', '_', '-')`},
		{"backends:\n  - name: \"be;disable server be/s1\"\n    source: {haproxy: {counter: bytes_in}}\n",
			`c.yml:2: backends[0]: name: character ';' is not allowed in HAProxy names (letters, digits, '.', ':', '_', '-')`},
		{"backends:\n  - name: \"be\\nshow info\"\n    source: {haproxy: {counter: bytes_in}}\n",
			`c.yml:2: backends[0]: name: character '\n' is not allowed in HAProxy names (letters, digits, '.', ':', '_', '-')`},
		{"backends:\n  - name: be\n    source:\n      prometheus:\n        url: http://127.0.0.1:9090\n        query: up\n        server_map:\n          node-1: s1\n          node-2: \"s2;x\"\n",
			`c.yml:9: backends[0] (be): source: prometheus: server_map: node-2: server name: character ';' is not allowed in HAProxy names (letters, digits, '.', ':', '_', '-')`},
		{"backends:\n  - name: be\n    source:\n      graphite:\n        url: http://127.0.0.1:8080\n        target: a.*\n        server_map: {a: s 1}\n",
			`c.yml:7: backends[0] (be): source: graphite: server_map: a: server name: character ' ' is not allowed in HAProxy names (letters, digits, '.', ':', '_', '-')`},
	} {
		_, err := Parse("c.yml", []byte(tc.yaml), noEnv)
		if err == nil || err.Error() != tc.want {
			t.Errorf("got  %v\nwant %s\nfor\n%s", err, tc.want, tc.yaml)
		}
	}
	ipvs := "backends:\n  - name: udp ingest\n    ipvs:\n      service: udp://10.0.0.1:2003\n      servers: {\"node 1\": 10.0.2.1}\n" +
		"    source:\n      prometheus: {url: \"http://127.0.0.1:9090\", query: up, server_map: {n1: \"node 1\"}}\n"
	if _, err := Parse("c.yml", []byte(ipvs), noEnv); err != nil {
		t.Errorf("IPVS backend: %v", err)
	}
}

// A name HAProxy cannot take is never quoted back: neither a markup-bearing
// backend name nor a server_map target appears in the error, which names
// the backend by its index and the character at fault.
func TestRefusedNameNotQuotedBack(t *testing.T) {
	for _, tc := range []struct{ yaml, secret string }{
		{"backends:\n  - name: \"<script>alert(1)</script>\"\n    source: {haproxy: {counter: bytes_in}}\n", "script>"},
		{"backends:\n  - name: be\n    source:\n      prometheus:\n        url: http://127.0.0.1:9090\n        query: up\n        server_map: {n1: \"<img src=x>\"}\n", "img src"},
	} {
		_, err := Parse("c.yml", []byte(tc.yaml), noEnv)
		if err == nil {
			t.Fatalf("accepted:\n%s", tc.yaml)
		}
		if strings.Contains(err.Error(), tc.secret) {
			t.Errorf("the refused name is quoted back: %v", err)
		}
		if !strings.Contains(err.Error(), "is not allowed in HAProxy names") {
			t.Errorf("the error does not say what is wrong: %v", err)
		}
	}
}
