package haproxy

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/haproxy-weighter/haproxy-weighter/internal/testenv"
	"github.com/haproxy-weighter/haproxy-weighter/weighter"
)

// capturedTables are the stick-table replies kept in ../testdata/haproxy-*/
// (testdata/README.md), captured from pinConfig with capturedPins written.
var capturedTables = []struct{ file, cmd string }{
	{"show-table.txt", "show table"},
	{"show-table-be_pin.txt", "show table be_pin"},
	{"show-table-be_pin6.txt", "show table be_pin6"},
}

// capturedPins is the pin tables' state the replies were captured in: a pin
// to s3 (id 7), an entry naming no server (id 99), and in the ipv6 table an
// IPv4 client and an IPv6 one.
var capturedPins = []string{
	"set table be_pin key 127.0.0.5 data.server_id 7",
	"set table be_pin key 127.0.0.6 data.server_id 99",
	"set table be_pin6 key ::ffff:127.0.0.5 data.server_id 1",
	"set table be_pin6 key 2001:db8::1 data.server_id 1",
}

// capturedPinTables is what the captured replies parse to, on every version.
var capturedPinTables = map[string]weighter.PinTable{
	"be_pin": {Name: "be_pin", Size: 100, Used: 2,
		Pins: []weighter.Pin{{Client: "127.0.0.5", Server: "s3"}}, Stray: []string{"127.0.0.6"}},
	"be_pin6": {Name: "be_pin6", Size: 10, Used: 2,
		Pins: []weighter.Pin{{Client: "127.0.0.5", Server: "a"}, {Client: "2001:db8::1", Server: "a"}}},
}

// TestCapturedPinTables captures `show table` and `show table <be>` from
// every HAProxy version again and checks that the committed replies parse
// as the fresh ones do, and to capturedPinTables (entries in any order: the
// dump's order is the tree's). With -update-captures it rewrites them.
func TestCapturedPinTables(t *testing.T) {
	for _, version := range testenv.HAProxyVersions() {
		t.Run(version, func(t *testing.T) {
			t.Parallel()
			dir := capturedDirOf(t, version)
			h := testenv.StartHAProxyVersion(t, version, pinConfig(t, testenv.FreePort(t)))
			c := newClient(t, h.Socket)
			for _, cmd := range capturedPins {
				require.Empty(t, raw(t, c, cmd), cmd)
			}
			for _, f := range capturedTables {
				fresh := testenv.Command(t, h.Socket, f.cmd)
				path := filepath.Join(dir, f.file)
				if *updateCaptures {
					require.NoError(t, os.WriteFile(path, []byte(fresh), 0o644))
				}
				committed, err := os.ReadFile(path)
				require.NoError(t, err, "capture it with -update-captures")
				if f.cmd == "show table" {
					for _, be := range []string{"be_pin", "be_pin6", "be_full", "be_track", "be_str"} {
						want, err := findTable(be, fresh)
						if be == "be_str" {
							require.ErrorIs(t, err, weighter.ErrNoPinTable)
						}
						got, _ := findTable(be, string(committed))
						assert.Equal(t, want, got, be)
					}
					continue
				}
				be := strings.TrimPrefix(f.cmd, "show table ")
				ids := map[int]string{1: "s1", 2: "s2", 7: "s3"}
				if be == "be_pin6" {
					ids = map[int]string{1: "a"}
				}
				want, err := parseTableDump(be, strings.NewReader(fresh), ids, maxPinEntries)
				require.NoError(t, err)
				got, err := parseTableDump(be, strings.NewReader(string(committed)), ids, maxPinEntries)
				require.NoError(t, err)
				assert.Equal(t, capturedPinTables[be].Pins, sortedPins(want.Pins), "fresh")
				want.Pins, got.Pins = sortedPins(want.Pins), sortedPins(got.Pins)
				assert.Equal(t, want, got)
				want.Pins = capturedPinTables[be].Pins
				assert.Equal(t, capturedPinTables[be], want)
			}
		})
	}
}

// capturedDirOf is ../testdata/haproxy-<release>/ of a tested branch.
func capturedDirOf(t *testing.T, version string) string {
	t.Helper()
	for _, v := range capturedVersions {
		if strings.HasPrefix(v, version+".") {
			return filepath.Join("..", "testdata", "haproxy-"+v)
		}
	}
	t.Fatalf("no captured release of HAProxy %s in %v", version, capturedVersions)
	return ""
}

func sortedPins(pins []weighter.Pin) []weighter.Pin {
	out := append([]weighter.Pin(nil), pins...)
	for i := range out {
		for j := i + 1; j < len(out); j++ {
			if out[j].Client < out[i].Client {
				out[i], out[j] = out[j], out[i]
			}
		}
	}
	return out
}

// TestPinsReadIsBounded: a table of more entries than maxPinEntries is read
// up to it (Used says how many it holds), and the reader stops taking the
// dump there: of 100,000 entries it reads little more than the cap's lines.
func TestPinsReadIsBounded(t *testing.T) {
	h := testenv.StartHAProxy(t, pinConfig(t, testenv.FreePort(t)))
	c := newClient(t, h.Socket)
	n := maxPinEntries + 500
	cmds := make([]string, n)
	for i := range cmds {
		cmds[i] = fmt.Sprintf("set table be_big key 10.%d.%d.%d data.server_id 1", i>>16, i>>8&255, i&255)
	}
	_, err := c.roundTrip(testCtx(t), cmds)
	require.NoError(t, err)
	table, err := c.Backend("be_big").Pins(testCtx(t))
	require.NoError(t, err)
	assert.Equal(t, n, table.Used)
	assert.Equal(t, 200<<10, table.Size, "200k")
	assert.Equal(t, maxPinEntries, len(table.Pins))

	var dump strings.Builder
	dump.WriteString("# table: be_big, type: ip, size:200000, used:100000\n")
	for i := range 100_000 {
		fmt.Fprintf(&dump, "0x7f0819caa010: key=10.%d.%d.%d use=0 exp=7199551 shard=0 server_id=1 server_key=-\n", i>>16, i>>8&255, i&255)
	}
	dump.WriteString("\n")
	r := &tallyReader{r: strings.NewReader(dump.String())}
	table, err = parseTableDump("be_big", r, map[int]string{1: "s1"}, maxPinEntries)
	require.NoError(t, err)
	assert.Equal(t, maxPinEntries, len(table.Pins))
	assert.Equal(t, 100_000, table.Used)
	perLine := dump.Len() / 100_000
	assert.Less(t, r.n, (maxPinEntries+1)*perLine+maxTableLine, "read %d of %d bytes", r.n, dump.Len())
}

type tallyReader struct {
	r io.Reader
	n int
}

func (c *tallyReader) Read(p []byte) (int, error) {
	k, err := c.r.Read(p)
	c.n += k
	return k, err
}
