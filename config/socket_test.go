package config

import (
	"strings"
	"testing"
	"time"

	"github.com/haproxy-weighter/haproxy-weighter/haproxy"
	"github.com/haproxy-weighter/haproxy-weighter/internal/duration"
)

// A backend's own haproxy block is its socket; the others keep the
// top-level one, and an unset timeout is the top-level one.
func TestBackendSocket(t *testing.T) {
	file := `haproxy: {socket: /run/a.sock, timeout: 3s}
backends:
  - name: be_a
    source: {haproxy: {counter: bytes_in}}
  - name: be_b
    haproxy: {socket: /run/b.sock}
    source: {haproxy: {counter: bytes_in}}
  - name: be_c
    haproxy: {socket: "127.0.0.1:9999", timeout: 1s, master: true}
    source: {haproxy: {counter: bytes_in}}
`
	c, err := Parse("f.yml", []byte(file), noEnv)
	if err != nil {
		t.Fatal(err)
	}
	want := []haproxy.Config{
		{Socket: "/run/a.sock", Timeout: duration.Duration(3 * time.Second)},
		{Socket: "/run/b.sock", Timeout: duration.Duration(3 * time.Second)},
		{Socket: "127.0.0.1:9999", Timeout: duration.Duration(time.Second), Master: true},
	}
	for i, w := range want {
		if got := c.SocketOf(&c.Backends[i]); got != w {
			t.Errorf("%s: socket %+v, want %+v", c.Backends[i].Name, got, w)
		}
	}
}

func TestBackendSocketErrors(t *testing.T) {
	for _, tc := range []struct{ name, file, want string }{
		{"empty socket", `backends:
  - name: be_a
    haproxy: {timeout: 1s}
    source: {haproxy: {counter: bytes_in}}
`, `f.yml:3: backends[0] (be_a): haproxy: socket is required`},
		{"one socket two timeouts", `haproxy: {socket: /run/a.sock}
backends:
  - name: be_a
    source: {haproxy: {counter: bytes_in}}
  - name: be_b
    haproxy: {socket: /run/a.sock, timeout: 9s}
    source: {haproxy: {counter: bytes_in}}
`, `f.yml:6: backends[1] (be_b): haproxy: socket /run/a.sock is also set by the top-level haproxy with other settings`},
		{"one socket master and not", `backends:
  - name: be_a
    haproxy: {socket: /run/m.sock, master: true}
    source: {haproxy: {counter: bytes_in}}
  - name: be_b
    haproxy: {socket: /run/m.sock}
    source: {haproxy: {counter: bytes_in}}
`, `f.yml:6: backends[1] (be_b): haproxy: socket /run/m.sock is also set by backends[0] (be_a) with other settings`},
		{"IPVS without HAProxy", `backends:
  - name: svc
    ipvs: {service: "udp://10.0.0.1:2003", servers: {n1: "10.0.2.1:2003"}}
    haproxy: {socket: /run/b.sock}
    source: {prometheus: {url: "http://127.0.0.1:9090", query: up, server_label: server}}
`, `f.yml:4: backends[0] (svc): haproxy: an IPVS service whose source does not read HAProxy uses no runtime socket`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse("f.yml", []byte(tc.file), noEnv)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("got %v\nwant %s", err, tc.want)
			}
		})
	}
}

func TestMatch(t *testing.T) {
	prom := `source: {prometheus: {url: "http://127.0.0.1:9090", query: up, server_label: instance}}`
	c, err := Parse("f.yml", []byte("backends:\n  - name: be\n    match: address\n    "+prom+"\n  - name: be2\n    "+prom+"\n"), noEnv)
	if err != nil {
		t.Fatal(err)
	}
	if !c.Backends[0].MatchesAddress() || c.Backends[1].MatchesAddress() {
		t.Errorf("match: %q %q", c.Backends[0].Match, c.Backends[1].Match)
	}
	for _, tc := range []struct{ name, file, want string }{
		{"unknown value", "backends:\n  - name: be\n    match: ip\n    " + prom + "\n",
			`f.yml:3: backends[0] (be): match: want name or address, got "ip"`},
		{"HAProxy stats", "backends:\n  - name: be\n    match: address\n    source: {haproxy: {counter: bytes_in}}\n",
			`f.yml:3: backends[0] (be): match: address needs a source that names servers by address; source.haproxy names them as HAProxy does`},
		{"IPVS", "backends:\n  - name: svc\n    match: address\n    ipvs: {service: \"udp://10.0.0.1:2003\", servers: {n1: \"10.0.2.1:2003\"}}\n    " + prom + "\n",
			`f.yml:3: backends[0] (svc): match: address is for HAProxy backends`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse("f.yml", []byte(tc.file), noEnv)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("got %v\nwant %s", err, tc.want)
			}
		})
	}
}

// --master and --match set what master: and match: set in a file.
func TestFromFlagsMasterMatch(t *testing.T) {
	prom := map[string]string{"prometheus-url": "http://127.0.0.1:9090", "query": "up", "server-label": "instance"}
	c, err := FromFlags(Flags{Socket: "/run/haproxy-master.sock", Master: true, Match: MatchAddress, Backend: "be", Source: prom})
	if err != nil {
		t.Fatal(err)
	}
	if !c.HAProxy.Master || !c.Backends[0].MatchesAddress() {
		t.Errorf("master %v match %q", c.HAProxy.Master, c.Backends[0].Match)
	}
	_, err = FromFlags(Flags{Match: "ip", Backend: "be", Source: prom})
	if err == nil || err.Error() != `--match: want name or address, got "ip"` {
		t.Errorf("got %v", err)
	}
}
