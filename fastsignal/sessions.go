package fastsignal

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/haproxy-weighter/haproxy-weighter/haproxy"
	"github.com/haproxy-weighter/haproxy-weighter/weighter"
)

// localReader reads an HAProxy backend's fast local signal for the weighter.
// A reload that keeps the unit's source keeps the reader too, on the old
// client: the client holds the per-stream sums the counters are made of.
type localReader struct {
	counter string
	b       *haproxy.RuntimeBackend
	// open asks for the open streams with their rates, which only the shed
	// planner uses; set from the backend's shed block at build and reload.
	open atomic.Bool
	// next is when the reader's next read can be a new dump of HAProxy (unix
	// ns): the runner's first cycle waits for it, so that it has a rate.
	next atomic.Int64
}

var _ weighter.LocalReader = (*localReader)(nil)

func newLocalReader(b *haproxy.RuntimeBackend, dir weighter.Bytes) *localReader {
	counter := haproxy.LocalBoth
	switch dir {
	case weighter.BytesIn:
		counter = haproxy.CounterBytesIn
	case weighter.BytesOut:
		counter = haproxy.CounterBytesOut
	}
	return &localReader{counter: counter, b: b}
}

// ReadLocal reads the signal of the servers from the newest `show sess
// all` of the backend's HAProxy.
func (r *localReader) ReadLocal(ctx context.Context, servers []weighter.ServerState) (weighter.LocalRead, error) {
	got, err := r.b.ReadLocal(ctx, haproxy.LocalQuery{Counter: r.counter, Servers: weighter.Names(servers), Open: r.open.Load()})
	if err != nil {
		return weighter.LocalRead{}, err
	}
	r.next.Store(got.Next.UnixNano())
	return got.LocalRead, nil
}

// nextRead is when a read can next see a new dump of HAProxy (zero before
// the first read): reads before it return the same counters, no rate.
func (r *localReader) nextRead() time.Time {
	if n := r.next.Load(); n != 0 {
		return time.Unix(0, n)
	}
	return time.Time{}
}
