package haproxycfg

import (
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// haproxyCheck proves path is a configuration the real HAProxy accepts.
func haproxyCheck(t *testing.T, path string) {
	t.Helper()
	bin, err := exec.LookPath("haproxy")
	if err != nil {
		t.Fatalf("haproxy not found in PATH (install it: apt-get install haproxy): %v", err)
	}
	out, err := exec.Command(bin, "-c", "-f", path).CombinedOutput()
	require.NoError(t, err, "haproxy -c -f %s:\n%s", path, out)
}

// lineOf is the number of the first line of path that starts with text
// (after its indent).
func lineOf(t *testing.T, path, text string) int {
	t.Helper()
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	for i, l := range strings.Split(string(data), "\n") {
		if strings.HasPrefix(strings.TrimSpace(l), text) {
			return i + 1
		}
	}
	t.Fatalf("%s has no line with %q", path, text)
	return 0
}

// testBackends is what the daemon does in every test file: be_app weighed
// by show stat's bytes, with two servers named by a server_map, and the
// listen section be_cache weighed by the fast signal, show stat's bytes its
// fallback.
var testBackends = []Expected{
	{Name: "be_app", Socket: "/run/haproxy/admin.sock", Servers: []string{"s1", "web3"}, StatBytes: true},
	{Name: "be_cache", Socket: "/run/haproxy/admin.sock", StatBytes: true, FastSignal: true},
}

// Each file of testdata/ is clean.cfg with one thing changed, which must
// give exactly its warning; clean.cfg gives none. Every file is first
// checked by the real haproxy -c.
func TestCheckRealConfigurations(t *testing.T) {
	type want struct {
		at      string // text of the line the warning points to; "" for none
		backend string
		text    string
	}
	cases := map[string][]want{
		"clean.cfg":      nil,
		"quoted.cfg":     nil, // clean.cfg with quoted names and socket path
		"disabled.cfg":   {{"disabled", "be_app", "disabled: HAProxy does not start it"}},
		"no-backend.cfg": {{"", "be_app", "no backend or listen section of that name"}},
		"frontend-only.cfg": {{"frontend be_app", "be_app",
			"is a frontend, which has no servers; weights go to a backend or listen section"}},
		"static-rr.cfg": {{"balance static-rr", "be_app",
			"balance static-rr: HAProxy takes no runtime weight but 0 and 100%; use roundrobin or leastconn"}},
		"balance-first.cfg": {{"balance first", "be_app", "balance first ignores server weights; use roundrobin or leastconn"}},
		"hash-map-based.cfg": {{"balance uri", "be_cache",
			"balance uri with hash-type map-based (the default) ignores runtime weight changes; add hash-type consistent"}},
		"hash-map-based-defaults.cfg": {{"hash-type map-based", "be_cache",
			"balance hdr with hash-type map-based (the default) ignores runtime weight changes; add hash-type consistent"}},
		"no-contstats.cfg": {{"backend be_app", "be_app",
			"source haproxy reads byte counters, which count an open connection's bytes only when it closes without option contstats (add it to frontend fe_app)"}},
		"contstats-undone.cfg": {{"backend be_app", "be_app",
			"source haproxy reads byte counters, which count an open connection's bytes only when it closes without option contstats (add it to frontend fe_app)"}},
		"contstats-listen.cfg": {{"listen be_cache", "be_cache",
			"when the fast signal is dead, source haproxy reads byte counters, which count an open connection's bytes only when it closes without option contstats (add it to listen be_cache)"}},
		"no-server-state.cfg": {{"backend be_app", "be_app",
			"weights go back to the file's at each HAProxy reload: no load-server-state-from-file (with server-state-file in global)"}},
		"no-state-file.cfg": {
			{"load-server-state-from-file global", "be_app",
				"weights go back to the file's at each HAProxy reload: load-server-state-from-file global, but no server-state-file in global"},
			{"load-server-state-from-file global", "be_cache",
				"weights go back to the file's at each HAProxy reload: load-server-state-from-file global, but no server-state-file in global"},
		},
		"socket-operator.cfg": {{"stats socket", "",
			"stats socket /run/haproxy/admin.sock is level operator (the default): setting weights needs level admin"}},
		"socket-user.cfg": {{"stats socket", "",
			"stats socket /run/haproxy/admin.sock is level user: setting weights needs level admin"}},
		"no-socket.cfg": {{"", "", "no stats socket at /run/haproxy/admin.sock (haproxy.socket) in the global section"}},
		"agent-check.cfg": {{"server s2", "be_app",
			"agent-check on server s2: a weight in the agent's reply overwrites the daemon's"}},
		"missing-server.cfg": {{"backend be_app", "be_app",
			"server web3 (named by server_map) is declared by no server or server-template line"}},
	}
	files, err := filepath.Glob("testdata/*.cfg")
	require.NoError(t, err)
	require.Len(t, files, len(cases), "every file in testdata/ has its case")
	for name, wants := range cases {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join("testdata", name)
			haproxyCheck(t, path)
			f, err := Read(path)
			require.NoError(t, err)
			var expected []string
			for _, w := range wants {
				line := 0
				if w.at != "" {
					line = lineOf(t, path, w.at)
				}
				expected = append(expected, Warning{Path: path, Line: line, Backend: w.backend, Text: w.text}.String())
			}
			var got []string
			for _, w := range f.Check(testBackends) {
				got = append(got, w.String())
			}
			assert.Equal(t, expected, got)
		})
	}
}

// A stats socket counts as the daemon's when HAProxy would listen where
// the daemon connects.
func TestSameSocket(t *testing.T) {
	for _, c := range []struct {
		addr, prefix, socket string
		same                 bool
	}{
		{"/run/haproxy/admin.sock", "", "/run/haproxy/admin.sock", true},
		{"unix@/run/haproxy/admin.sock", "", "/run/haproxy//admin.sock", true},
		{"admin.sock", "/run/haproxy/", "/run/haproxy/admin.sock", true},
		{"/run/haproxy/admin.sock", "", "/run/haproxy/other.sock", false},
		{"ipv4@127.0.0.1:9999", "", "127.0.0.1:9999", true},
		{"127.0.0.1:9999", "", "localhost:9999", true},
		{"*:9999", "", "10.0.0.1:9999", true},
		{":9999", "", "127.0.0.1:9999", true},
		{"ipv6@[::1]:9999", "", "[::1]:9999", true},
		{"127.0.0.1:9999", "", "127.0.0.1:9998", false},
		{"10.0.0.2:9999", "", "10.0.0.1:9999", false},
		{"127.0.0.1:9999", "", "/run/haproxy/admin.sock", false},
	} {
		assert.Equal(t, c.same, sameSocket(c.addr, c.prefix, c.socket), "%s (prefix %q) vs %s", c.addr, c.prefix, c.socket)
	}
}

// A proxy takes the last defaults section before it, or the one "from"
// names; its own setting wins, and "no option" undoes an inherited option.
func TestDefaultsResolution(t *testing.T) {
	cfg := `
defaults base
  option contstats
  balance source
defaults plain
  balance roundrobin
frontend a
  default_backend b
frontend c from base
  no option contstats
  default_backend b
frontend d from base
  default_backend b
backend b from base
  hash-type consistent
`
	f, err := Parse("x.cfg", strings.NewReader(cfg))
	require.NoError(t, err)
	on := map[string]bool{}
	for _, name := range []string{"a", "c", "d"} {
		on[name], _ = f.named("frontend", name).option("contstats")
	}
	assert.Equal(t, map[string]bool{"a": false, "c": false, "d": true}, on)
	b := f.named("backend", "b")
	d, ok := b.lookup(keyword("balance"))
	require.True(t, ok)
	assert.Equal(t, []string{"balance", "source"}, d.words)
	_, ok = f.checkBalance(b, "b")
	assert.False(t, ok, "balance source with hash-type consistent takes runtime weights")
}

// server-template declares prefix<n> for n in its range, and nothing else.
func TestServerTemplateDeclares(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for range 500 {
		from, to := 1+rng.IntN(20), rng.IntN(40)
		spec := fmt.Sprintf("%d-%d", from, to)
		if from == 1 && rng.IntN(2) == 0 {
			spec = fmt.Sprint(to)
		}
		f, err := Parse("x.cfg", strings.NewReader("backend b\n  server-template srv "+spec+" example.com:80\n"))
		require.NoError(t, err)
		s := f.named("backend", "b")
		n := rng.IntN(50)
		name := fmt.Sprintf("srv%d", n)
		assert.Equal(t, n >= from && n <= to, s.declares(name), "%s in %s", name, spec)
		assert.False(t, s.declares(fmt.Sprintf("srv0%d", n)), "srv0%d in %s", n, spec)
		assert.False(t, s.declares("srv"), "srv in %s", spec)
	}
}

// What is not an HAProxy configuration is an error that names the file.
func TestReadRefusesWhatIsNotAConfiguration(t *testing.T) {
	dir := t.TempDir()
	yml := filepath.Join(dir, "config.yaml")
	require.NoError(t, os.WriteFile(yml, []byte("haproxy:\n  socket: /run/haproxy/admin.sock\n"), 0o600))
	comments := filepath.Join(dir, "empty.cfg")
	require.NoError(t, os.WriteFile(comments, []byte("# nothing\n\n"), 0o600))
	for path, msg := range map[string]string{
		yml:                           yml + `:1: "haproxy:" is outside any section`,
		comments:                      comments + ": no global, defaults, frontend, backend or listen section",
		filepath.Join(dir, "missing"): "open " + filepath.Join(dir, "missing") + ": no such file",
		dir:                           dir + ": is a directory",
	} {
		_, err := Read(path)
		require.Error(t, err, path)
		assert.Contains(t, err.Error(), msg)
	}
}

// A warning reads as a compiler's (gcc, go vet) and as the daemon's own
// configuration warnings: file:line: warning: message.
func TestWarningString(t *testing.T) {
	assert.Equal(t, "haproxy.cfg:12: warning: backend be: balance first ignores server weights",
		Warning{Path: "haproxy.cfg", Line: 12, Backend: "be", Text: "balance first ignores server weights"}.String())
	assert.Equal(t, "haproxy.cfg: warning: no stats socket at /run/haproxy/admin.sock",
		Warning{Path: "haproxy.cfg", Text: "no stats socket at /run/haproxy/admin.sock"}.String())
}

// Each file of testdata/pin/ is clean.cfg with be_app pinned (Expected.Pin)
// and its pin lines changed, which must give exactly its warnings; pin/clean.cfg
// and pin/ipv6.cfg give none. Every file is first checked by the real haproxy -c.
func TestCheckPinLines(t *testing.T) {
	type want struct {
		at   string // text of the line the warning points to
		text string
	}
	const add = "add the two lines `stick-table type ip size 100k expire 2h` and `stick match src`"
	cases := map[string][]want{
		"clean.cfg": nil,
		"ipv6.cfg":  nil, // type ipv6, peers, a match with a condition
		"none.cfg": {{"backend be_app",
			"clients cannot be pinned: the backend has no stick-table keyed on the client's address and no stick match src; " + add}},
		"no-match.cfg":    {{"stick-table", "clients cannot be pinned: no stick match src, so HAProxy never looks the pins up; add `stick match src`"}},
		"other-table.cfg": {{"stick-table", "clients cannot be pinned: no stick match src, so HAProxy never looks the pins up; add `stick match src`"}},
		"string.cfg": {
			{"stick-table", "clients cannot be pinned: stick-table type string is not keyed on the client's address; make it `stick-table type ip size 100k expire 2h` (or type ipv6)"},
			{"stick-table", "clients cannot be pinned: no stick match src, so HAProxy never looks the pins up; add `stick match src`"},
		},
		"stick-on.cfg": {{"stick on", "stick on makes HAProxy write stick-table entries itself, which overwrite the daemon's pins; use `stick match src` alone"}},
		"store.cfg": {{"stick store-request",
			"stick store-request makes HAProxy write stick-table entries itself, which overwrite the daemon's pins; use `stick match src` alone"}},
		"shared.cfg": {{"stick-table",
			"the pin table is replicated to 2 peers (peers mesh): other balancers' daemons write pins in it too; set `pin: {shared: true}` so that this daemon leaves theirs alone"}},
		"no-expire.cfg": {{"stick-table",
			"stick-table without expire: an entry never leaves (a client gone keeps its pin until the table is full, when HAProxy evicts entries silently); add expire, as in `stick-table type ip size 100k expire 2h`"}},
	}
	files, err := filepath.Glob("testdata/pin/*.cfg")
	require.NoError(t, err)
	require.Len(t, files, len(cases), "every file in testdata/pin/ has its case")
	backends := append([]Expected(nil), testBackends...)
	backends[0].Pin = true
	for name, wants := range cases {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join("testdata", "pin", name)
			haproxyCheck(t, path)
			f, err := Read(path)
			require.NoError(t, err)
			var expected []string
			for _, w := range wants {
				expected = append(expected, Warning{Path: path, Line: lineOf(t, path, w.at), Backend: "be_app", Text: w.text}.String())
			}
			var got []string
			for _, w := range f.Check(backends) {
				got = append(got, w.String())
			}
			assert.Equal(t, expected, got)
			var unpinned []string
			for _, w := range f.Check(testBackends) {
				unpinned = append(unpinned, w.String())
			}
			assert.Empty(t, unpinned, "a backend not pinned is not checked for pins")
			// Pinned by default (if it has the table): checked as a pinned
			// one when it has any stick line, not warned about without.
			auto := append([]Expected(nil), testBackends...)
			auto[0].PinIfTable = true
			var gotAuto []string
			for _, w := range f.Check(auto) {
				gotAuto = append(gotAuto, w.String())
			}
			if name == "none.cfg" {
				assert.Empty(t, gotAuto, "a backend without a stick line, pinned only if it has the table")
			} else {
				assert.Equal(t, expected, gotAuto)
			}
			if name == "shared.cfg" {
				shared := append([]Expected(nil), backends...)
				shared[0].PinShared = true
				assert.Empty(t, f.Check(shared), "pin.shared set: nothing to say")
			}
		})
	}
}
