package sources

import (
	"fmt"
	"io"
	"net/http"
)

// maxBody bounds what we read of a reply: a render or query of a few hundred
// servers is far smaller, and one that matches a whole fleet (a missing filter
// or aggregation) must not fill the balancer's memory. Prometheus' own client
// reads a reply whole, hence the limit here, below both sources.
const maxBody = 32 << 20

// errTooLarge ends the read of a reply longer than maxBody.
var errTooLarge = fmt.Errorf("reply larger than %d MiB, not read: narrow the query or target", maxBody>>20)

// limitTransport bounds every reply body to maxBody.
type limitTransport struct{ next http.RoundTripper }

func (t *limitTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := t.next.RoundTrip(req)
	if err == nil {
		resp.Body = &limitedBody{ReadCloser: resp.Body, left: maxBody}
	}
	return resp, err
}

// CloseIdleConnections lets http.Client.CloseIdleConnections reach the transport.
func (t *limitTransport) CloseIdleConnections() { closeIdle(t.next) }

// closeIdle closes rt's idle connections if it keeps any.
func closeIdle(rt http.RoundTripper) {
	if c, ok := rt.(interface{ CloseIdleConnections() }); ok {
		c.CloseIdleConnections()
	}
}

// limitedBody reads at most left bytes, then fails with errTooLarge if more
// come, rather than cutting the reply short in silence.
type limitedBody struct {
	io.ReadCloser
	left int64
}

func (b *limitedBody) Read(p []byte) (int, error) {
	if b.left <= 0 {
		var one [1]byte
		n, err := b.ReadCloser.Read(one[:])
		if n > 0 {
			return 0, errTooLarge
		}
		return 0, err
	}
	if int64(len(p)) > b.left {
		p = p[:b.left]
	}
	n, err := b.ReadCloser.Read(p)
	b.left -= int64(n)
	return n, err
}
