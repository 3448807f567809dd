package sources

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
)

// maxBody bounds what we read of a reply: a render or query of a few hundred
// servers is far smaller, and one that matches a whole fleet (a missing filter
// or aggregation) must not fill the balancer's memory. Prometheus' own client
// reads a reply whole, hence the limit here, below both sources.
const maxBody = 32 << 20

// ErrTooLarge is what a reply longer than the client's limit fails with
// (errors.Is): the sources' maxBody, or a smaller one (NewHTTPClient).
var ErrTooLarge = errors.New("reply too large")

// tooLarge is ErrTooLarge saying the limit.
type tooLarge struct{ limit int64 }

func (e tooLarge) Error() string {
	return fmt.Sprintf("reply larger than %d MiB, not read: narrow the query or target", e.limit>>20)
}

func (e tooLarge) Is(target error) bool { return target == ErrTooLarge }

// inMemory is the size up to which a reply of unknown length is held in
// memory while it is counted; a longer one is counted into a temporary file.
const inMemory = 1 << 20

// limitTransport refuses a reply longer than its limit (maxBody unless set)
// before anyone reads it into memory. A reply that says its length is
// refused by it, unread. One that does not (chunked) is read to its end, or
// to limit+1 bytes, at the first read of its body (so that a reply whose
// headers came and whose body stalls fails as a body not read, not as no
// answer), into memory up to inMemory and beyond that into an unlinked
// temporary file, and handed on only if it fits: the readers above
// (client_golang buffers a reply whole, then decodes it) never hold more
// than maxBody, and a refused reply leaves nothing on the heap to keep the
// process's memory up. Nothing here inflates a compressed reply:
// prometheus/common's transport sets DisableCompression, so a gzip body is
// counted, and refused, as the bytes that came.
type limitTransport struct {
	next  http.RoundTripper
	limit int64 // 0: maxBody
}

func (t *limitTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := t.next.RoundTrip(req)
	if err != nil {
		return nil, err
	}
	limit := t.limit
	if limit <= 0 {
		limit = maxBody
	}
	if resp.ContentLength > limit {
		resp.Body.Close()
		return nil, fmt.Errorf("http %d with content-length %d: %w", resp.StatusCode, resp.ContentLength, tooLarge{limit})
	}
	if resp.ContentLength >= 0 {
		// net/http ends the body at the length said; limitedBody is for
		// a reader that trusts no one.
		resp.Body = &limitedBody{ReadCloser: resp.Body, left: limit, limit: limit}
		return resp, nil
	}
	resp.Body = &spooledBody{rc: resp.Body, status: resp.StatusCode, limit: limit}
	return resp, nil
}

// spooledBody is a body of unknown length, spooled whole (spool) at its
// first read and read from there.
type spooledBody struct {
	rc     io.ReadCloser
	status int
	limit  int64
	body   io.ReadCloser // after the first read: the spooled body, or nil
	err    error         // after the first read: why it could not be spooled
}

func (b *spooledBody) Read(p []byte) (int, error) {
	if b.body == nil && b.err == nil {
		b.body, _, b.err = spool(b.rc, b.limit)
		if b.err != nil {
			b.err = fmt.Errorf("http %d: %w", b.status, b.err)
		}
	}
	if b.err != nil {
		return 0, b.err
	}
	return b.body.Read(p)
}

func (b *spooledBody) Close() error {
	if b.body != nil {
		return b.body.Close()
	}
	return b.rc.Close() // spool closed it already when it failed: closing twice is harmless
}

// CloseIdleConnections lets http.Client.CloseIdleConnections reach the transport.
func (t *limitTransport) CloseIdleConnections() { closeIdle(t.next) }

// closeIdle closes rt's idle connections if it keeps any.
func closeIdle(rt http.RoundTripper) {
	if c, ok := rt.(interface{ CloseIdleConnections() }); ok {
		c.CloseIdleConnections()
	}
}

// spool reads rc to its end and returns what it held and its length, or
// ErrTooLarge as soon as it passes limit bytes. Up to inMemory bytes stay in
// memory; more go to an unlinked temporary file, closed with the returned
// body. Where no temporary file can be made, the rest is left to be read as
// it comes, still bounded by limit (limitedBody), as before spooling. spool
// closes rc, or the body it returns does.
func spool(rc io.ReadCloser, limit int64) (io.ReadCloser, int64, error) {
	head, err := io.ReadAll(io.LimitReader(rc, min(inMemory, limit)+1))
	if err != nil {
		rc.Close()
		return nil, 0, fmt.Errorf("read reply: %w", err)
	}
	n := int64(len(head))
	if n <= min(inMemory, limit) {
		rc.Close()
		return io.NopCloser(bytes.NewReader(head)), n, nil
	}
	if n > limit {
		rc.Close()
		return nil, 0, tooLarge{limit}
	}
	f, err := tempFile()
	if err != nil {
		rest := &limitedBody{ReadCloser: rc, left: limit - n, limit: limit}
		return struct {
			io.Reader
			io.Closer
		}{io.MultiReader(bytes.NewReader(head), rest), rc}, -1, nil
	}
	defer rc.Close()
	body, size, err := spoolToFile(f, head, rc, limit)
	if err != nil {
		f.Close()
		return nil, 0, err
	}
	return body, size, nil
}

// spoolToFile writes head and the rest of r, at most limit bytes in all, to
// f, and returns f rewound.
func spoolToFile(f *os.File, head []byte, r io.Reader, limit int64) (io.ReadCloser, int64, error) {
	if _, err := f.Write(head); err != nil {
		return nil, 0, fmt.Errorf("spool reply: %w", err)
	}
	rest, err := io.Copy(f, io.LimitReader(r, limit-int64(len(head))+1))
	if err != nil {
		return nil, 0, fmt.Errorf("read reply: %w", err)
	}
	size := int64(len(head)) + rest
	if size > limit {
		return nil, 0, tooLarge{limit}
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return nil, 0, fmt.Errorf("spool reply: %w", err)
	}
	return f, size, nil
}

// tempFile is a temporary file already unlinked: it goes away when closed,
// or with the process, whatever happens to the reply.
func tempFile() (*os.File, error) {
	f, err := os.CreateTemp("", "haproxy-weighter-reply-*")
	if err != nil {
		return nil, err
	}
	if err := os.Remove(f.Name()); err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

// limitedBody reads at most left bytes, then fails with ErrTooLarge (of
// limit) if more come, rather than cutting the reply short in silence.
type limitedBody struct {
	io.ReadCloser
	left, limit int64
}

func (b *limitedBody) Read(p []byte) (int, error) {
	if b.left <= 0 {
		var one [1]byte
		n, err := b.ReadCloser.Read(one[:])
		if n > 0 {
			return 0, tooLarge{b.limit}
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
