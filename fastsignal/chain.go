package fastsignal

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"math"
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
//  2. sessions: `show sess all` (sessions.go), spaced by the stream count.
//  3. stat: `show stat`'s per-server byte counters (stat.go), which
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
	ReaderKernel   = "kernel"
	ReaderSessions = "sessions"
	ReaderStat     = "stat"
	ReaderNone     = "none" // every reader failed: the source alone
)

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

// Chain is an HAProxy backend's fast signal: the best reader that works.
type Chain struct {
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

var _ weighter.LocalReader = (*Chain)(nil)

// newChain builds the chain over a backend's readers, in order: the
// socket table (kernel, nil when not built), show sess all, show stat (nil
// when not built).
func newChain(backend string, kernel, sessions, stat weighter.LocalReader, log *slog.Logger) *Chain {
	c := &Chain{backend: backend, log: log, now: time.Now, last: map[string]float64{}, base: map[string]float64{}}
	c.kernel, _ = kernel.(*kernelReader)
	c.sessions, _ = sessions.(*localReader)
	for _, r := range []struct {
		name string
		r    weighter.LocalReader
	}{{ReaderKernel, kernel}, {ReaderSessions, sessions}, {ReaderStat, stat}} {
		if r.r != nil {
			c.rungs = append(c.rungs, &fastRung{name: r.name, r: r.r})
		}
	}
	return c
}

// Pinned keeps only reader in the chain when it names one (fast_signal:
// kernel, sessions or stat): the operator chose it, for servers the socket
// table cannot tell apart (one address in two backends) or a benchmark of
// one reader. It fails as a chain whose every reader fails, the source
// weighing alone until it reads again, rather than stepping down to a
// reader that was not chosen. Any other value (on) keeps the whole chain.
func (c *Chain) Pinned(reader string) *Chain {
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
func (c *Chain) ReadLocal(ctx context.Context, servers []weighter.ServerState) (weighter.LocalRead, error) {
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
		if rung.name != ReaderSessions && c.sessions != nil {
			// The runner's first cycle waits for this before it reads
			// again (waitForSecondRead): a rate over the few milliseconds
			// after the start-up read is noise.
			c.sessions.next.Store(got.At.Add(minRateSpan).UnixNano())
		}
		return c.continued(rung.name, got), nil
	}
	if c.cur != ReaderNone {
		c.log.Warn("fast signal cannot be read", "reader", ReaderNone, "effect", "weighting by the source alone until one does", "err", errors.Join(errs...))
		c.cur = ReaderNone
	}
	return weighter.LocalRead{}, fmt.Errorf("no fast signal reader works: %w", errors.Join(errs...))
}

// failed marks rung down and says why, once per reason, naming the reader
// the chain goes on with.
func (c *Chain) failed(ctx context.Context, rung *fastRung, now time.Time, err error) {
	rung.down, rung.why = now, err
	rung.probe = errors.Is(err, sockdiag.ErrNotVisible)
	msg := err.Error()
	if msg == rung.said {
		c.log.Debug("fast signal reader still failing", "reader", rung.name, "err", err)
		return
	}
	rung.said = msg
	next := ReaderNone
	for i, r := range c.rungs {
		if r == rung && i+1 < len(c.rungs) {
			next = c.rungs[i+1].name
		}
	}
	c.log.Log(ctx, slog.LevelWarn, "fast signal reader failing", "reader", rung.name, "reason", why(rung.name, err),
		"next", next, "retry_every", retryBetter, "err", err)
}

// recovered clears rung's failure, saying so when it had been said.
func (c *Chain) recovered(ctx context.Context, rung *fastRung) {
	if rung.said != "" {
		c.log.Log(ctx, slog.LevelInfo, "fast signal reader back", "reader", rung.name)
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
func (c *Chain) continued(reader string, got weighter.LocalRead) weighter.LocalRead {
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

// Reader is the reader of the last read ("" before the first).
func (c *Chain) Reader() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.cur
}

// kernelReader reads an HAProxy backend's fast signal from the kernel's
// socket table: the servers' addresses from the cycle's `show servers
// state`, HAProxy's pids from `show info` or the master's `show proc`.
// When the backend sheds, it lists the open connections with their rates,
// and asks HAProxy for the stream of each connection of a server about to
// be shed from (findStreams), in the process that has it: a stream id is an
// address in one process, and a reload leaves the old process serving its
// connections beside the new one.
type kernelReader struct {
	hb     *haproxy.RuntimeBackend
	reader *sockdiag.Reader
	local  *sockdiag.LocalReader
	bytes  weighter.Bytes
	log    *slog.Logger
	// shedder is the unit's Shedder while the backend sheds (askOpenStreams).
	shedder atomic.Pointer[weighter.Shedder]
	// pins: the backend pins (SetPinning): without a Shedder, its
	// connections are listed with their server and rate alone.
	pins atomic.Bool

	// master: the socket is the master CLI, which reaches every worker,
	// old ones included (`@!<pid>`).
	master bool
	// procs are HAProxy's processes as the socket table's last read asked
	// them (haproxyPIDs), nil before.
	procs atomic.Pointer[haproxyProcs]
	// old finds the processes a reload without a master CLI left serving.
	old *oldProcs
	// now is the clock of the stream reads' spacing (tests set it).
	now func() time.Time

	mu      sync.Mutex
	visible bool                // the last read matched a socket to a server
	streams map[uint64]streamOf // by socket cookie: the stream found for it
	first   map[uint64]time.Time
	// missed are the connections a stream read did not find (a health
	// check's, a Lua socket's, an old process's the socket cannot reach):
	// not looked for again before retry, unless HAProxy's processes change.
	missed map[uint64]missedConn
	// nextFind spaces the stream reads of shedding as the dumps are
	// (LocalBudget): a full `show sess all` costs HAProxy ~6 µs a stream.
	// A read that failed is spaced the same: on 3.0 the dump guard's own
	// `show sess` lists every stream.
	nextFind  time.Time
	lastTotal int    // the streams the last stream read held
	findErr   string // the last stream read error logged
}

// haproxyProcs are HAProxy's processes as one read of the socket table
// asked them: through the master CLI every worker, the current one first;
// else the socket's own process.
type haproxyProcs struct {
	pids []int
}

// current is the process the socket's commands go to (0: not known).
func (p *haproxyProcs) current() int {
	if p == nil || len(p.pids) == 0 {
		return 0
	}
	return p.pids[0]
}

// key names the set, to tell when it changed.
func (p *haproxyProcs) key() string {
	if p == nil {
		return ""
	}
	return fmt.Sprint(p.pids)
}

// missRetry is how long a connection a stream read did not find is not
// looked for again while HAProxy's processes stay the same: such a
// connection has no stream to find there (a health check's, a Lua
// socket's, an old process's), and each look is a dump of every stream.
const missRetry = 30 * time.Second

// missedConn is a connection a stream read did not find.
type missedConn struct {
	procs string    // haproxyProcs.key of the processes asked
	retry time.Time // when to look again anyway
}

// streamOf is HAProxy's stream of one connection, found by its server side.
type streamOf struct {
	id     string // the stream's Ref: its id, and through the master CLI its worker's @!<pid>
	pid    int    // the process that listed it (0: not known)
	serial uint64
	client string
	age    time.Duration // at found
	found  time.Time
}

// newKernelReader builds the socket table reader of an HAProxy backend;
// with listeners, it reads the backend's clients too.
func newKernelReader(hb *haproxy.RuntimeBackend, c *haproxy.Client, master bool, dir weighter.Bytes, log *slog.Logger, listeners ...netip.AddrPort) *kernelReader {
	k := &kernelReader{hb: hb, bytes: dir, log: log, master: master, now: time.Now, old: &oldProcs{log: log},
		streams: map[uint64]streamOf{}, first: map[uint64]time.Time{}, missed: map[uint64]missedConn{}}
	k.reader = sockdiag.New(sockdiag.Config{PIDs: k.haproxyPIDs(c, "/proc"), Listeners: listeners})
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
	switch sh := k.shedder.Load(); {
	case sh != nil:
		out.Open = k.open(ctx, last, sh)
	case k.pins.Load():
		out.Open = k.measured(last)
	}
	return out, nil
}

// measured lists the read's measured connections with their server and
// rate alone, for the Pinner: the kernel does not tie a client socket to a
// server socket, so it learns where a heavy client sits by matching the
// client's rate to them. A connection without a rate matches no client;
// no stream is looked up (that is the shed planner's, to close one).
func (k *kernelReader) measured(r sockdiag.TableReading) []weighter.ShedSession {
	out := make([]weighter.ShedSession, 0, len(r.Conns))
	for _, c := range r.Conns {
		if rate := k.rate(c); rate > 0 && !math.IsInf(rate, 0) {
			out = append(out, weighter.ShedSession{Server: c.Server, Rate: rate})
		}
	}
	return out
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
func (k *kernelReader) open(ctx context.Context, r sockdiag.TableReading, sh *weighter.Shedder) []weighter.ShedSession {
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
			delete(k.missed, cookie)
		}
	}
	k.findStreams(ctx, r, sh)
	procs := k.procs.Load()
	out := make([]weighter.ShedSession, 0, len(r.Conns))
	for _, c := range r.Conns {
		s := weighter.ShedSession{ID: "conn " + c.Local.String(), Server: c.Server, Age: r.At.Sub(k.first[c.Cookie]), Rate: k.rate(c)}
		if st, ok := k.streams[c.Cookie]; ok && k.reachable(st, procs) {
			s.ID, s.Serial, s.Client, s.Age = st.id, st.serial, st.client, st.age+r.At.Sub(st.found)
		}
		out = append(out, s)
	}
	return out
}

// reachable reports whether st can be closed through the socket: through
// the master CLI always (its id names its worker, current or old); through
// a worker's own socket only while that worker is the socket's process. A
// reload hands the socket to a new process, which has no such stream (or
// another one at the same address): the connection is then listed without
// a stream, counted and never chosen, until it ends.
func (k *kernelReader) reachable(st streamOf, procs *haproxyProcs) bool {
	now := procs.current()
	return k.master || st.pid == 0 || now == 0 || st.pid == now
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
// server's streams, or the whole backend's when several are due. Through
// the master CLI each stream is read from, and named by, the worker that
// has it: the current worker first, then the old ones a reload left
// serving, while connections are still not found. A failure is logged once,
// spaced as a read, and leaves those connections unclosable this cycle.
func (k *kernelReader) findStreams(ctx context.Context, r sockdiag.TableReading, sh *weighter.Shedder) {
	now := k.now()
	if now.Before(k.nextFind) {
		return
	}
	due := sh.Policy().For - 1
	hot := sh.Hot()
	procs := k.procs.Load()
	key := procs.key()
	want := map[string]bool{}
	var conns []sockdiag.Conn
	for _, c := range r.Conns {
		if _, known := k.streams[c.Cookie]; known || !(due <= 0 || hot[c.Server] >= due) {
			continue
		}
		if m, ok := k.missed[c.Cookie]; ok && m.procs == key && now.Before(m.retry) {
			continue
		}
		want[c.Server] = true
		conns = append(conns, c)
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
	workers := []int{0} // the socket's process
	if k.master && procs != nil && len(procs.pids) > 0 {
		workers = procs.pids
	}
	total, found, asked := 0, 0, 0
	var cmds []string
	var failed error
	for i, pid := range workers {
		if found == len(conns) {
			break
		}
		got, err := k.hb.WorkerStreams(ctx, pid, server)
		if err != nil {
			if i > 0 && errors.Is(err, haproxy.ErrNoWorker) {
				continue // an old worker that exited: its connections went with it
			}
			failed = err
			break
		}
		asked++
		total += got.Total
		cmds = append(cmds, got.Command)
		for _, c := range conns {
			// By the whole 4-tuple: one source port of HAProxy's may serve
			// connections to two servers.
			s, ok := got.Streams[haproxy.ServerConn{Local: c.Local, Remote: c.Remote}]
			if _, known := k.streams[c.Cookie]; known || !ok || s.Server != c.Server {
				continue
			}
			k.streams[c.Cookie] = streamOf{id: s.Ref(), pid: got.PID, serial: s.Serial, client: s.Client, age: s.Age, found: r.At}
			delete(k.missed, c.Cookie)
			found++
		}
	}
	p := haproxy.DefaultLocalBudget
	if asked > 0 {
		k.lastTotal = total
	}
	k.nextFind = now.Add(max(p.Share, time.Duration(max(total, k.lastTotal))*p.PerStream))
	if failed != nil {
		if msg := failed.Error(); msg != k.findErr {
			k.findErr = msg
			k.log.Warn("streams to shed not read", "err", failed, "effect", "the hot server's connections cannot be closed this cycle")
		}
		return
	}
	k.findErr = ""
	for _, c := range conns {
		if _, known := k.streams[c.Cookie]; !known {
			k.missed[c.Cookie] = missedConn{procs: key, retry: now.Add(missRetry)}
		}
	}
	k.log.Debug("streams to shed found by their server connections", "servers", slices.Sorted(maps.Keys(want)),
		"commands", cmds, "workers", workers, "streams", total, "wanted", len(conns), "matched", found)
}

// haproxyPIDs returns HAProxy's processes for the socket table reader:
// through the master CLI every worker `show proc` lists; through a worker's
// socket that worker and the old processes a reload left serving
// (oldProcs). None (every socket to a server counts) when the unix socket's
// listener is not the worker or its master as this pid namespace numbers
// them: HAProxy's pids are then its own namespace's and name other
// processes here (a sidecar without shareProcessNamespace). The processes
// as HAProxy numbers them are kept for the stream reads either way
// (k.procs): the master CLI's `@!<pid>` takes those.
func (k *kernelReader) haproxyPIDs(c *haproxy.Client, proc string) func(ctx context.Context) ([]int, error) {
	return func(ctx context.Context) ([]int, error) {
		pids, err := c.Processes(ctx)
		if err != nil {
			return nil, err
		}
		k.procs.Store(&haproxyProcs{pids: slices.Clone(pids)})
		peer, known, err := c.SocketPeer(ctx)
		if err != nil {
			return nil, err
		}
		if parent, _ := procParent(proc, pids[0]); known && peer != pids[0] && (peer == 0 || peer != parent) {
			return nil, nil
		}
		if !k.master {
			pids = append(pids, k.old.find(proc, pids[0])...)
		}
		return pids, nil
	}
}

// oldProcs finds, for a daemon on a worker's own socket, the HAProxy
// processes a reload left serving the connections they had: the socket is
// the new process's, and the old one's connections are HAProxy's load too.
// Three ways, as /proc shows them:
//   - the other children of the worker's parent when that parent is an
//     HAProxy master (-W, -Ws: Debian's unit) without a master CLI given;
//   - the pids the worker was started to replace, `-sf <pid>…` (or -st) in
//     its command line: a reload without a master (`haproxy -f … -sf $(cat
//     pidfile)`, the init scripts' reload);
//   - the processes an earlier read found, while they run (a reload whose
//     command line says nothing of the old process).
//
// Each must still run as HAProxy (the worker's command name) and have
// started before the worker: a pid the kernel gave another process since
// is not HAProxy's. When the set grows it says so once, at info.
type oldProcs struct {
	log  *slog.Logger
	mu   sync.Mutex
	seen map[int]uint64 // HAProxy's processes of earlier reads: pid → start time
	said []int          // the old processes last logged
}

// find returns the old processes serving beside worker.
func (o *oldProcs) find(proc string, worker int) []int {
	o.mu.Lock()
	defer o.mu.Unlock()
	me, ok := readProcStat(proc, worker)
	if !ok {
		return nil
	}
	old := map[int]bool{}
	for _, pid := range oldWorkers(proc, worker) {
		old[pid] = true
	}
	for _, pid := range replaced(proc, worker, me, 8) {
		old[pid] = true
	}
	for pid, start := range o.seen {
		if st, ok := readProcStat(proc, pid); ok && pid != worker && st.start == start && st.comm == me.comm && start <= me.start {
			old[pid] = true
		}
	}
	out := slices.Sorted(maps.Keys(old))
	seen := map[int]uint64{worker: me.start}
	for _, pid := range out {
		if st, ok := readProcStat(proc, pid); ok {
			seen[pid] = st.start
		}
	}
	o.seen = seen
	if news := slices.DeleteFunc(slices.Clone(out), func(p int) bool { return slices.Contains(o.said, p) }); len(news) > 0 && o.log != nil {
		o.log.Info("old HAProxy process still serves connections",
			"old_pids", news, "pid", worker, "effect", "counted in the fast signal until they end")
	}
	o.said = out
	return out
}

// replaced returns the pids worker's command line names after -sf or -st
// (the processes it was started to replace) that still run as HAProxy and
// started before it, and theirs in turn, depth levels deep.
func replaced(proc string, worker int, me procStat, depth int) []int {
	if depth == 0 {
		return nil
	}
	raw, err := os.ReadFile(filepath.Join(proc, strconv.Itoa(worker), "cmdline"))
	if err != nil {
		return nil
	}
	var out []int
	after := false
	for _, arg := range strings.Split(strings.TrimRight(string(raw), "\x00"), "\x00") {
		if arg == "-sf" || arg == "-st" {
			after = true
			continue
		}
		pid, err := strconv.Atoi(arg)
		if !after || err != nil || pid <= 0 {
			after = false
			continue
		}
		st, ok := readProcStat(proc, pid)
		if !ok || pid == worker || st.comm != me.comm || st.start > me.start || slices.Contains(out, pid) {
			continue
		}
		out = append(out, pid)
		out = append(out, replaced(proc, pid, st, depth-1)...)
	}
	return out
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

// procStat is what /proc/<pid>/stat says of a process that is used here.
type procStat struct {
	ppid  int
	comm  string
	start uint64 // clock ticks after boot: with the pid, names one process
}

// readProcStat reads /proc/<pid>/stat ("pid (comm) state ppid … starttime
// …", starttime the 22nd field); ok is false when it cannot.
func readProcStat(proc string, pid int) (procStat, bool) {
	raw, err := os.ReadFile(filepath.Join(proc, strconv.Itoa(pid), "stat"))
	if err != nil {
		return procStat{}, false
	}
	s := string(raw)
	open, end := strings.IndexByte(s, '('), strings.LastIndexByte(s, ')')
	if open < 0 || end < open {
		return procStat{}, false
	}
	f := strings.Fields(s[end+1:]) // from the state, the 3rd field
	if len(f) < 2 {
		return procStat{}, false
	}
	ppid, err := strconv.Atoi(f[1])
	if err != nil {
		return procStat{}, false
	}
	out := procStat{ppid: ppid, comm: s[open+1 : end]}
	if len(f) > 19 {
		out.start, _ = strconv.ParseUint(f[19], 10, 64)
	}
	return out, true
}

// procParent reads a process's parent pid and command name from
// /proc/<pid>/stat; 0 when it cannot.
func procParent(proc string, pid int) (int, string) {
	st, ok := readProcStat(proc, pid)
	if !ok {
		return 0, ""
	}
	return st.ppid, st.comm
}
