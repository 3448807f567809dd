package daemon

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/haproxy-weighter/haproxy-weighter/haproxy"
	"github.com/haproxy-weighter/haproxy-weighter/sockdiag"
	"github.com/haproxy-weighter/haproxy-weighter/weighter"
)

// An HAProxy backend's fast signal comes from one of three readers, in
// this order (docs/sockdiag.md):
//
//  1. kernel: the kernel's socket table (package sockdiag). It costs
//     HAProxy nothing and reads the same on every version, so it is read
//     every cycle at every size. It needs the daemon in HAProxy's network
//     namespace and a NETLINK_SOCK_DIAG socket.
//  2. sessions: `show sess all` (local.go), spaced by the stream count.
//  3. stat: `show stat`'s per-server byte counters (statfast.go), which
//     move only when connections close unless the frontend has `option
//     contstats`.
//
// and below them the source alone (a failed read: weighter.Fresh weighs by
// the external source). The chain starts at the top, goes down a reader
// when one fails (saying why once), and tries the better ones again every
// retryBetter.

// Reader names: haproxy_weighter_fast_signal_reader's reader label and the
// plan's reason.
const (
	readerKernel   = "kernel"
	readerSessions = "sessions"
	readerStat     = "stat"
	readerNone     = "none" // every reader failed: the source alone
)

// readerText says what each reader reads, for the log.
var readerText = map[string]string{
	readerKernel:   "the kernel's socket table",
	readerSessions: "show sess all",
	readerStat:     "show stat byte counters",
	readerNone:     "nothing (the source alone)",
}

// retryBetter is how long a reader that failed is skipped before the chain
// tries it again: long enough not to flap between readers (each switch
// costs a cycle without a rate), short enough that a fixed cause (HAProxy
// restarted, a capability granted) is noticed within a minute.
const retryBetter = time.Minute

// minRateSpan is the least span the first rate after the start-up read
// should cover: as show sess all's dumps are spaced by (LocalBudget.Share).
var minRateSpan = haproxy.DefaultLocalBudget.Share

// fastRung is one reader of the chain.
type fastRung struct {
	name string
	r    weighter.LocalReader
	// down is when the reader last failed (zero: it did not), why the
	// error; a down reader is skipped until down + retryBetter.
	down time.Time
	why  error
	// probe: after a failure, the reader must show it sees HAProxy's
	// connections before it is used again (the kernel after ErrNotVisible:
	// a table without them reads as an idle backend, and the check that
	// says so takes several reads).
	probe bool
	said  string // the failure logged last, not logged again
}

// fastChain is an HAProxy backend's fast signal: the best reader that works.
type fastChain struct {
	backend  string
	log      *slog.Logger
	now      func() time.Time
	sessions *localReader // the show sess all reader, also the chain's addresses for the peers
	kernel   *kernelReader

	mu    sync.Mutex
	rungs []*fastRung
	cur   string             // the reader of the last good read ("" before)
	last  map[string]float64 // each server's Bytes as last returned
	base  map[string]float64 // added to the current reader's Bytes (continuity across switches)
}

var _ weighter.LocalReader = (*fastChain)(nil)

// newFastChain builds the chain over a backend's readers, in order: the
// socket table (kernel, nil when not built), show sess all, show stat (nil
// when not built).
func newFastChain(backend string, kernel, sessions, stat weighter.LocalReader, log *slog.Logger) *fastChain {
	c := &fastChain{backend: backend, log: log, now: time.Now, last: map[string]float64{}, base: map[string]float64{}}
	c.kernel, _ = kernel.(*kernelReader)
	c.sessions, _ = sessions.(*localReader)
	for _, r := range []struct {
		name string
		r    weighter.LocalReader
	}{{readerKernel, kernel}, {readerSessions, sessions}, {readerStat, stat}} {
		if r.r != nil {
			c.rungs = append(c.rungs, &fastRung{name: r.name, r: r.r})
		}
	}
	return c
}

// pinned keeps only reader in the chain when it names one (fast_signal:
// kernel, sessions or stat): the operator chose it, for servers the socket
// table cannot tell apart (one address in two backends) or a benchmark of
// one reader. It fails as a chain whose every reader fails, the source
// weighing alone until it reads again, rather than stepping down to a
// reader that was not chosen. Any other value (on) keeps the whole chain.
func (c *fastChain) pinned(reader string) *fastChain {
	for _, r := range c.rungs {
		if r.name == reader {
			c.rungs = []*fastRung{r}
			break
		}
	}
	return c
}

// ReadLocal reads the best reader that works. Bytes go on from the last
// read across a change of reader (each reader counts from its own base),
// and the read after a change has no rate (Reset).
func (c *fastChain) ReadLocal(ctx context.Context, servers []weighter.ServerState) (weighter.LocalRead, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.now()
	var errs []error
	for _, rung := range c.rungs {
		if !rung.down.IsZero() && now.Sub(rung.down) < retryBetter {
			errs = append(errs, fmt.Errorf("%s: %w", rung.name, rung.why))
			continue
		}
		got, err := rung.r.ReadLocal(ctx, servers)
		if err == nil && rung.probe && !sees(rung.r) {
			err = rung.why // still nothing to show it sees HAProxy's connections
		}
		if err != nil {
			if ctx.Err() != nil {
				return weighter.LocalRead{}, err // cancelled: nothing learnt about the reader
			}
			c.failed(ctx, rung, now, err)
			errs = append(errs, fmt.Errorf("%s: %w", rung.name, err))
			continue
		}
		c.recovered(ctx, rung)
		if rung.name != readerSessions && c.sessions != nil {
			// The runner's first cycle waits for this before it reads
			// again (waitForSecondRead): a rate over the few milliseconds
			// after the start-up read is noise.
			c.sessions.next.Store(got.At.Add(minRateSpan).UnixNano())
		}
		return c.continued(rung.name, got), nil
	}
	if c.cur != readerNone {
		c.log.Warn("fast signal: no reader works; weighting by the source alone until one does", "err", errors.Join(errs...))
		c.cur = readerNone
	}
	return weighter.LocalRead{}, fmt.Errorf("no fast signal reader works: %w", errors.Join(errs...))
}

// failed marks rung down and says why, once per reason, naming the reader
// the chain goes on with.
func (c *fastChain) failed(ctx context.Context, rung *fastRung, now time.Time, err error) {
	rung.down, rung.why = now, err
	rung.probe = errors.Is(err, sockdiag.ErrNotVisible)
	msg := err.Error()
	if msg == rung.said {
		c.log.Debug("fast signal reader still failing", "reader", rung.name, "err", err)
		return
	}
	rung.said = msg
	next := readerNone
	for i, r := range c.rungs {
		if r == rung && i+1 < len(c.rungs) {
			next = c.rungs[i+1].name
		}
	}
	c.log.Log(ctx, slog.LevelWarn, fmt.Sprintf("fast signal: %s cannot be read (%s); reading %s, trying it again every %s",
		readerText[rung.name], why(rung.name, err), readerText[next], retryBetter), "reader", next, "err", err)
}

// recovered clears rung's failure, saying so when it had been said.
func (c *fastChain) recovered(ctx context.Context, rung *fastRung) {
	if rung.said != "" {
		c.log.Log(ctx, slog.LevelInfo, "fast signal: "+readerText[rung.name]+" can be read again; reading it", "reader", rung.name)
	}
	rung.down, rung.why, rung.probe, rung.said = time.Time{}, nil, false, ""
}

// why says in words why a reader fails, for the log line.
func why(reader string, err error) string {
	switch {
	case errors.Is(err, sockdiag.ErrNotVisible):
		return "not visible: the daemon is not in HAProxy's network namespace"
	case errors.Is(err, haproxy.ErrStreamDumpUnsafe):
		return "this HAProxy version crashes on the dump while a Lua socket exists"
	case errors.Is(err, sockdiag.ErrNoSocket):
		return "no NETLINK_SOCK_DIAG socket: a seccomp profile, or a kernel without inet_diag"
	case errors.Is(err, sockdiag.ErrNoAddress):
		return "no server has an IP address in it: unix@ or abns@ servers, or addresses not resolved yet"
	}
	return "the read failed"
}

// continued makes got's counters go on from the last read: a new reader
// starts from what the last one returned, with no rate for this read.
func (c *fastChain) continued(reader string, got weighter.LocalRead) weighter.LocalRead {
	switched := c.cur != reader
	out := got
	out.Reader = reader
	out.Servers = make(map[string]weighter.LocalCounter, len(got.Servers))
	for name, s := range got.Servers {
		if _, ok := c.base[name]; switched || !ok {
			c.base[name] = c.last[name] - s.Bytes
		}
		s.Bytes += c.base[name]
		if switched {
			s.Reset, s.Rate = true, 0
		}
		c.last[name] = s.Bytes
		out.Servers[name] = s
	}
	if switched {
		out.Open = nil // rates across two readers mean nothing
	}
	c.cur = reader
	return out
}

// reader is the reader of the last read ("" before the first).
func (c *fastChain) reader() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.cur
}

// kernelReader reads an HAProxy backend's fast signal from the kernel's
// socket table: the servers' addresses from the cycle's `show servers
// state`, HAProxy's pids from `show info` or the master's `show proc`.
// When the backend sheds, it lists the open connections with their rates,
// and asks HAProxy for the stream of each connection of a server about to
// be shed from (findStreams).
type kernelReader struct {
	hb     *haproxy.Backend
	reader *sockdiag.Reader
	local  *sockdiag.LocalReader
	bytes  weighter.Bytes
	log    *slog.Logger
	// shedder is the unit's Shedder while the backend sheds (askOpenStreams).
	shedder atomic.Pointer[weighter.Shedder]

	mu      sync.Mutex
	visible bool                // the last read matched a socket to a server
	streams map[uint64]streamOf // by socket cookie: the stream found for it
	first   map[uint64]time.Time
	// nextFind spaces the stream reads of shedding as the dumps are
	// (LocalBudget): a full `show sess all` costs HAProxy ~6 µs a stream.
	nextFind time.Time
	findErr  string // the last stream read error logged
}

// streamOf is HAProxy's stream of one connection, found by its server side.
type streamOf struct {
	id     string
	serial uint64
	client string
	age    time.Duration // at found
	found  time.Time
}

// newKernelReader builds the socket table reader of an HAProxy backend.
func newKernelReader(hb *haproxy.Backend, c *haproxy.Client, master bool, dir weighter.Bytes, log *slog.Logger) *kernelReader {
	k := &kernelReader{hb: hb, bytes: dir, log: log, streams: map[uint64]streamOf{}, first: map[uint64]time.Time{}}
	k.reader = sockdiag.New(sockdiag.Config{PIDs: haproxyPIDs(c, master, "/proc")})
	k.local = sockdiag.NewLocalReader(k.reader, func(servers []weighter.ServerState) (map[string]netip.AddrPort, error) {
		return haproxy.ServerAddrs(servers), nil
	}, dir)
	return k
}

// ReadLocal reads the table, checks with HAProxy's scur of the same cycle
// that HAProxy's connections are in it, and lists the open connections
// when the backend sheds.
func (k *kernelReader) ReadLocal(ctx context.Context, servers []weighter.ServerState) (weighter.LocalRead, error) {
	out, err := k.local.ReadLocal(ctx, servers)
	if err != nil {
		return weighter.LocalRead{}, err
	}
	last := k.local.Last()
	if err := k.reader.Check(last, haproxy.ServerSessions(servers)); err != nil {
		return weighter.LocalRead{}, err
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	k.visible = last.Matched > 0
	if sh := k.shedder.Load(); sh != nil {
		out.Open = k.open(ctx, last, sh)
	}
	return out, nil
}

// sees reports whether r's last read found one of HAProxy's connections
// (a reader that cannot say does not).
func sees(r weighter.LocalReader) bool {
	v, ok := r.(interface{ sees() bool })
	return ok && v.sees()
}

// sees reports whether the last read found a socket to one of the servers.
func (k *kernelReader) sees() bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.visible
}

// owner says how the last read told HAProxy's sockets from others'.
func (k *kernelReader) owner() (sockdiag.Ownership, string) {
	r := k.local.Last()
	return r.Owner, r.OwnerWhy
}

// open lists the read's connections for the shed planner, each with its
// own rate. A connection is a session the planner may close only once its
// stream is known (ID, Serial, client, age): those of a server hot for
// For-1 cycles are looked up now, the others are listed without (they
// count towards max_share, and are never chosen: no client).
func (k *kernelReader) open(ctx context.Context, r sockdiag.Reading, sh *weighter.Shedder) []weighter.ShedSession {
	live := make(map[uint64]bool, len(r.Conns))
	for _, c := range r.Conns {
		live[c.Cookie] = true
		if _, ok := k.first[c.Cookie]; !ok {
			k.first[c.Cookie] = r.At
		}
	}
	for cookie := range k.first {
		if !live[cookie] {
			delete(k.first, cookie)
			delete(k.streams, cookie)
		}
	}
	k.findStreams(ctx, r, sh)
	out := make([]weighter.ShedSession, 0, len(r.Conns))
	for _, c := range r.Conns {
		s := weighter.ShedSession{ID: "conn " + c.Local.String(), Server: c.Server, Age: r.At.Sub(k.first[c.Cookie]), Rate: k.rate(c)}
		if st, ok := k.streams[c.Cookie]; ok {
			s.ID, s.Serial, s.Client, s.Age = st.id, st.serial, st.client, st.age+r.At.Sub(st.found)
		}
		out = append(out, s)
	}
	return out
}

// rate is a connection's rate in the direction weighed by (NaN when the
// read before did not see it).
func (k *kernelReader) rate(c sockdiag.Conn) float64 {
	switch k.bytes {
	case weighter.BytesOut:
		return c.RateOut
	case weighter.BytesBoth:
		return c.RateIn + c.RateOut
	}
	return c.RateIn
}

// findStreams asks HAProxy for the streams of each server hot for at least
// For-1 cycles (the next plan may shed from it; with for: 1 every server)
// that has connections without a known stream, within the dump budget: one
// server's streams, or the whole backend's when several are due. A failure
// is logged once and leaves those connections unclosable this cycle.
func (k *kernelReader) findStreams(ctx context.Context, r sockdiag.Reading, sh *weighter.Shedder) {
	now := time.Now()
	if now.Before(k.nextFind) {
		return
	}
	due := sh.Policy().For - 1
	hot := sh.Hot()
	want := map[string]bool{}
	for _, c := range r.Conns {
		if _, known := k.streams[c.Cookie]; !known && (due <= 0 || hot[c.Server] >= due) {
			want[c.Server] = true
		}
	}
	if len(want) == 0 {
		return
	}
	server := "" // the whole backend
	if len(want) == 1 {
		for s := range want {
			server = s
		}
	}
	got, err := k.hb.ServerStreams(ctx, server)
	if err != nil {
		if msg := err.Error(); msg != k.findErr {
			k.findErr = msg
			k.log.Warn("shedding: HAProxy's streams could not be read; the hot server's connections cannot be closed this cycle", "err", err)
		}
		return
	}
	k.findErr = ""
	p := haproxy.DefaultLocalBudget
	k.nextFind = now.Add(max(p.Share, time.Duration(got.Total)*p.PerStream))
	found := 0
	for _, c := range r.Conns {
		// By the whole 4-tuple: one source port of HAProxy's may serve
		// connections to two servers.
		s, ok := got.Streams[haproxy.ServerConn{Local: c.Local, Remote: c.Remote}]
		if !ok || !want[c.Server] || s.Server != c.Server {
			continue
		}
		k.streams[c.Cookie] = streamOf{id: s.ID, serial: s.Serial, client: s.Client, age: s.Age, found: r.At}
		found++
	}
	k.log.Debug("shedding: streams found by their server connections", "servers", slices.Sorted(maps.Keys(want)),
		"command", got.Command, "streams", len(got.Streams), "matched", found, "reply_bytes", got.Bytes, "took", got.Took)
}

// haproxyPIDs returns HAProxy's processes for the socket table reader:
// through the master CLI every worker `show proc` lists; through a worker's
// socket that worker and, when its parent is an HAProxy master (-W, -Ws:
// Debian's unit), the master's other children, the old workers still
// serving the connections they had at a reload. None (every socket to a
// server counts) when the unix socket's listener is not the worker or its
// master as this pid namespace numbers them: HAProxy's pids are then its own
// namespace's and name other processes here (a sidecar without
// shareProcessNamespace).
func haproxyPIDs(c *haproxy.Client, master bool, proc string) func(ctx context.Context) ([]int, error) {
	return func(ctx context.Context) ([]int, error) {
		pids, err := c.Processes(ctx)
		if err != nil {
			return nil, err
		}
		peer, known, err := c.SocketPeer(ctx)
		if err != nil {
			return nil, err
		}
		if parent, _ := procParent(proc, pids[0]); known && peer != pids[0] && (peer == 0 || peer != parent) {
			return nil, nil
		}
		if !master {
			pids = append(pids, oldWorkers(proc, pids[0])...)
		}
		return pids, nil
	}
}

// oldWorkers returns the other children of worker's parent when that
// parent is an HAProxy master (its command name is the worker's); none
// when /proc does not say (another pid namespace, no master).
func oldWorkers(proc string, worker int) []int {
	ppid, comm := procParent(proc, worker)
	if ppid <= 1 {
		return nil
	}
	if _, pcomm := procParent(proc, ppid); pcomm != comm {
		return nil
	}
	raw, err := os.ReadFile(filepath.Join(proc, strconv.Itoa(ppid), "task", strconv.Itoa(ppid), "children"))
	if err != nil {
		return nil
	}
	var out []int
	for f := range strings.FieldsSeq(string(raw)) {
		pid, err := strconv.Atoi(f)
		if err != nil || pid == worker {
			continue
		}
		if _, c := procParent(proc, pid); c == comm {
			out = append(out, pid)
		}
	}
	return out
}

// procParent reads a process's parent pid and command name from
// /proc/<pid>/stat ("pid (comm) state ppid …"); 0 when it cannot.
func procParent(proc string, pid int) (int, string) {
	raw, err := os.ReadFile(filepath.Join(proc, strconv.Itoa(pid), "stat"))
	if err != nil {
		return 0, ""
	}
	s := string(raw)
	open, end := strings.IndexByte(s, '('), strings.LastIndexByte(s, ')')
	if open < 0 || end < open {
		return 0, ""
	}
	f := strings.Fields(s[end+1:])
	if len(f) < 2 {
		return 0, ""
	}
	ppid, err := strconv.Atoi(f[1])
	if err != nil {
		return 0, ""
	}
	return ppid, s[open+1 : end]
}
