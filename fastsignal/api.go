package fastsignal

import (
	"context"
	"log/slog"
	"net/netip"
	"os/user"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/haproxy-weighter/haproxy-weighter/haproxy"
	"github.com/haproxy-weighter/haproxy-weighter/sockdiag"
	"github.com/haproxy-weighter/haproxy-weighter/weighter"
)

// NewHAProxyChain builds an HAProxy backend's fast signal: the chain of
// readers, the kernel's socket table first. master: c is HAProxy's master
// CLI; dir is the direction weighed by.
func NewHAProxyChain(hb *haproxy.RuntimeBackend, c *haproxy.Client, master bool, dir weighter.Bytes, log *slog.Logger) *Chain {
	return NewHAProxyChainWith(hb, c, master, dir, log, ChainOptions{})
}

// ChainOptions are what the fast signal reads beyond the servers.
type ChainOptions struct {
	// Listeners are the bind addresses of the frontends that route to the
	// backend alone (haproxycfg's (*File).Listeners): the socket table
	// reader then lists the backend's clients on each read
	// (weighter.LocalRead.Clients), in the servers' dump (one kernel filter
	// for both; a dump of its own only for an address family no server
	// uses). None: LocalRead.Clients stays nil and no client socket is
	// asked for.
	Listeners []netip.AddrPort
}

// NewHAProxyChainWith is NewHAProxyChain with options.
func NewHAProxyChainWith(hb *haproxy.RuntimeBackend, c *haproxy.Client, master bool, dir weighter.Bytes, log *slog.Logger, opts ChainOptions) *Chain {
	return newChain(hb.Name(), newKernelReader(hb, c, master, dir, log, opts.Listeners...), newLocalReader(hb, dir),
		&statReader{hb: hb, bytes: dir}, log)
}

// ClientCounts are what the last socket table read said of the backend's
// clients, for the daemon to log and expose.
type ClientCounts struct {
	// Read: the last read listed the clients (listeners given, and the
	// socket table read).
	Read bool
	// Open is HAProxy's client connections on the listeners; Tracked the
	// client addresses tracked; Untracked the addresses with a connection
	// that were not, the tracked ones being sockdiag.MaxClients already
	// (their clients cannot be pinned: say it once).
	Open, Tracked, Untracked int
}

// Clients says what the last read of the socket table found of the
// backend's clients (zero without listeners, before a read, or while
// another reader serves: only the socket table lists clients).
func (c *Chain) Clients() ClientCounts {
	if c.kernel == nil || c.Reader() != ReaderKernel {
		return ClientCounts{}
	}
	r := c.kernel.local.Last().Clients
	if r == nil {
		return ClientCounts{}
	}
	return ClientCounts{Read: true, Open: r.Open, Tracked: r.Tracked, Untracked: r.Untracked}
}

// minAsyncTimeout bounds a background fetch of the calibrating source from
// below: a refresh set shorter than a slow source's answer must not cut it.
const minAsyncTimeout = 10 * time.Second

// AnswerInBackground has a calibrating metrics source answer in the
// background (asyncSource), asked every refresh: the 2 s cycle must not
// decide whether it may calibrate.
func AnswerInBackground(src weighter.Source, refresh time.Duration) weighter.Source {
	return newAsyncSource(src, max(refresh, minAsyncTimeout))
}

// SetShedder has the chain's readers list the open streams with their
// rates only when the backend sheds (sh not nil): nothing else reads them.
// The socket table's connections are listed only when shedding (each with
// its rate), and their streams looked up only for a server about to be
// shed from.
func (c *Chain) SetShedder(sh *weighter.Shedder) {
	if c.sessions != nil {
		c.sessions.open.Store(sh != nil)
	}
	if c.kernel != nil {
		c.kernel.shedder.Store(sh)
	}
}

// SetPinning has the socket table reader list the open connections with
// their rates when the backend pins (on), as it does when it sheds: the
// Pinner learns where each heavy client sits by matching the client's rate
// to them. Without, every client sits nowhere known: a heavy client is
// pinned wherever the projection puts it (not where it sits, within
// min_gain), and its load counted on its server as well. The connections
// are in the read already (no stream is looked up, no `show sess` made);
// the sessions reader, whose listing is costly, is not asked.
func (c *Chain) SetPinning(on bool) {
	if c.kernel != nil {
		c.kernel.pins.Store(on)
	}
}

// ListsOpen reports whether the chain's readers list the open streams (the
// backend sheds: SetShedder).
func (c *Chain) ListsOpen() bool {
	return c.sessions != nil && c.sessions.open.Load()
}

// NextRead is when `show sess all` can next see a new dump of HAProxy
// (zero before the first read): the first cycle waits for it, so that it
// has a rate.
func (c *Chain) NextRead() time.Time {
	if c.sessions == nil {
		return time.Time{}
	}
	return c.sessions.nextRead()
}

// StartAttrs say, for the start log, which reader the fast signal reads
// and, for the socket table, how it tells HAProxy's sockets from others'
// (and why not more precisely).
func (c *Chain) StartAttrs() []any {
	reader := c.Reader()
	out := []any{"reader", reader}
	if reader == ReaderKernel {
		own, why := c.kernel.owner()
		out = append(out, "ownership", own)
		if uids := c.kernel.ownerUIDs(); len(uids) > 0 {
			out = append(out, "ownership_uid", uidNames(uids))
		}
		if why != "" {
			out = append(out, "ownership_why", why)
		}
	}
	return out
}

// WarnRootUID says, at level, that the socket table tells HAProxy's
// sockets from others' by uid 0: every root process's connections to the
// servers (a health checker, a monitoring probe, an operator's curl) are
// then counted as HAProxy's load (measured: 389 kB/s and 7 sessions read
// for a server carrying 4.7 kB/s and 5), and how to make it exact. It says
// nothing when the chain does not read the socket table or tells sockets
// otherwise.
func (c *Chain) WarnRootUID(ctx context.Context, log *slog.Logger, level slog.Level) {
	if c.kernel == nil || c.Reader() != ReaderKernel {
		return
	}
	own, why := c.kernel.owner()
	if own != sockdiag.OwnerUID || !slices.Contains(c.kernel.ownerUIDs(), 0) {
		return
	}
	log.Log(ctx, level, "socket table counts root's connections as HAProxy's",
		"ownership", own, "ownership_uid", 0, "ownership_why", why,
		"effect", "HAProxy runs as root and its sockets are told from other processes' by uid 0, so every root process's connections to the servers count as HAProxy's load",
		"fix", "let the daemon read HAProxy's descriptors (run it as root, or give it CAP_SYS_PTRACE) or run HAProxy as a user of its own (global: user haproxy)")
}

// ownerUIDs are the uids the last read told HAProxy's sockets by (none
// unless its ownership is uid).
func (k *kernelReader) ownerUIDs() []uint32 {
	return k.local.Last().UIDs
}

// uidNames writes uids with their user names where this host knows them:
// "0 (root)", "108 (haproxy)", comma-separated.
func uidNames(uids []uint32) string {
	parts := make([]string, len(uids))
	for i, uid := range uids {
		id := strconv.FormatUint(uint64(uid), 10)
		parts[i] = id
		if u, err := user.LookupId(id); err == nil && u.Username != "" {
			parts[i] += " (" + u.Username + ")"
		}
	}
	return strings.Join(parts, ", ")
}
