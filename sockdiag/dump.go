package sockdiag

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"
	"syscall"
	"time"
	"unsafe"

	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"
)

// The INET_DIAG ABI (include/uapi/linux/inet_diag.h). golang.org/x/sys/unix
// has the netlink family, SOCK_DIAG_BY_FAMILY and tcp_info but not the
// request and reply structures, so their layout is written down here.
const (
	// sizeofReq is struct inet_diag_req_v2: family, protocol, ext, pad,
	// states (u32), then struct inet_diag_sockid (48 bytes).
	sizeofReq = 56
	// sizeofMsg is struct inet_diag_msg: family, state, timer, retrans,
	// inet_diag_sockid, expires, rqueue, wqueue, uid, inode (u32 each).
	sizeofMsg = 72

	// Offsets in inet_diag_msg.
	offState  = 1
	offSport  = 4 // __be16
	offDport  = 6 // __be16
	offSrc    = 8 // __be32[4]
	offDst    = 24
	offCookie = 44 // __u32[2], host order, low word first
	offUID    = 64
	offInode  = 68

	// attrInfo is INET_DIAG_INFO (struct tcp_info); attrBytecode is
	// INET_DIAG_REQ_BYTECODE, the request's filter.
	attrInfo     = 2
	attrBytecode = 1
)

// TCP states (include/net/tcp_states.h).
const (
	stateEstablished = 1
	stateSynSent     = 2
	stateFinWait1    = 4
	stateFinWait2    = 5
	stateClose       = 7
	stateCloseWait   = 8
	stateLastAck     = 9
	stateClosing     = 11
)

// dumpStates are the states asked for: every state a connection HAProxy
// opened to a server passes through while it carries bytes, and the closing
// ones, whose sockets still hold the final counters after HAProxy closed
// them (orphans, inode 0). Not LISTEN (not a connection), not TIME_WAIT
// (a minisock without tcp_info), not SYN_RECV (accepted, not opened).
const dumpStates = 1<<stateEstablished | 1<<stateSynSent | 1<<stateFinWait1 | 1<<stateFinWait2 |
	1<<stateClose | 1<<stateCloseWait | 1<<stateLastAck | 1<<stateClosing

// Offsets of the tcp_info counters used, from x/sys/unix's copy of the
// structure (the kernel's ABI: fields are only ever appended). A kernel
// older than a field sends a shorter tcp_info; the reader checks the length.
var (
	offBytesAcked    = int(unsafe.Offsetof(unix.TCPInfo{}.Bytes_acked))    // 4.1+
	offBytesReceived = int(unsafe.Offsetof(unix.TCPInfo{}.Bytes_received)) // 4.1+
)

// socket is one TCP socket of the dump.
type socket struct {
	local, remote netip.AddrPort
	state         uint8
	uid, inode    uint32
	cookie        uint64 // the kernel's socket cookie: unique, never reused
	// acked is bytes_acked (data the peer acknowledged, plus one for the SYN
	// and one for a FIN once acknowledged); received is bytes_received
	// (data from the peer).
	acked, received uint64
	hasInfo         bool
}

// dumpRequest is one INET_DIAG dump: one address family, its filter, the
// states asked for (0: dumpStates, the server side's), and which sockets
// it is for: HAProxy's connections to the servers, its clients', or both.
type dumpRequest struct {
	family           uint8 // unix.AF_INET or unix.AF_INET6
	bytecode         []byte
	states           uint32
	servers, clients bool
}

// encode returns the request's netlink payload.
func (r dumpRequest) encode() ([]byte, error) {
	b := make([]byte, sizeofReq)
	b[0] = r.family
	b[1] = unix.IPPROTO_TCP
	b[2] = 1 << (attrInfo - 1) // idiag_ext: ask for INET_DIAG_INFO
	states := r.states
	if states == 0 {
		states = dumpStates
	}
	binary.NativeEndian.PutUint32(b[4:], states)
	if len(r.bytecode) == 0 {
		return b, nil
	}
	ae := netlink.NewAttributeEncoder()
	ae.Bytes(attrBytecode, r.bytecode)
	attrs, err := ae.Encode()
	if err != nil {
		return nil, fmt.Errorf("encode the filter: %w", err)
	}
	return append(b, attrs...), nil
}

// recvBuffer is the size of the buffer a dump is received into. The kernel
// fills each part of a dump up to the largest buffer the socket was read
// with, at most 32 KB (netlink_recvmsg): one large buffer means 8 times
// fewer parts, each a syscall and a resumption of the kernel's walk of the
// socket hash, than the page-sized buffer netlink.Conn.Receive starts each
// call with (it also peeks before each read and allocates per call).
const recvBuffer = 64 << 10

// dialer opens the netlink socket of one read; netNS, when > 0, is a
// network namespace file descriptor to read instead of the process's own.
// buf is the receive buffer, kept between reads (nil: one is made).
type dialer struct {
	netNS int
	buf   []byte
}

// ErrNoSocket: no NETLINK_SOCK_DIAG socket could be opened (a seccomp
// profile that forbids it, a kernel without inet_diag). A value, not a
// message, so that a caller tells it from other failures without reading
// the text.
var ErrNoSocket = errors.New("open a NETLINK_SOCK_DIAG socket")

// dump sends each request over one netlink socket and returns every socket
// of the replies to fn, with the request it answers. fn must not keep the
// socket's memory (it is reused).
// netlink.Conn opens the socket (in another namespace too), numbers and
// sends the requests and applies the deadline; the replies are read from
// its raw connection into one reused buffer (see recvBuffer).
func (d *dialer) dump(ctx context.Context, reqs []dumpRequest, fn func(*dumpRequest, *socket)) error {
	c, err := netlink.Dial(unix.NETLINK_SOCK_DIAG, &netlink.Config{NetNS: d.netNS})
	if err != nil {
		return fmt.Errorf("%w: %w", ErrNoSocket, err)
	}
	defer c.Close()
	// The kernel answers a dump at once; the deadline only guards a read
	// that would never end, and a cancelled context ends it now.
	if dl, ok := ctx.Deadline(); ok {
		if err := c.SetDeadline(dl); err != nil {
			return fmt.Errorf("netlink deadline: %w", err)
		}
	}
	stop := context.AfterFunc(ctx, func() { _ = c.SetDeadline(time.Unix(1, 0)) })
	defer stop()
	raw, err := c.SyscallConn()
	if err != nil {
		return fmt.Errorf("netlink raw connection: %w", err)
	}
	if len(d.buf) < recvBuffer {
		d.buf = make([]byte, recvBuffer)
	}
	for i := range reqs {
		r := &reqs[i]
		payload, err := r.encode()
		if err != nil {
			return err
		}
		sent, err := c.Send(netlink.Message{
			Header: netlink.Header{Type: unix.SOCK_DIAG_BY_FAMILY, Flags: netlink.Request | netlink.Dump},
			Data:   payload,
		})
		if err == nil {
			err = d.receive(raw, sent.Header.Sequence, func(s *socket) { fn(r, s) })
		}
		if err != nil {
			if ctx.Err() != nil {
				err = ctx.Err()
			}
			return fmt.Errorf("inet_diag dump (%s): %w", familyName(r.family), err)
		}
	}
	return nil
}

// receive reads the parts of one dump until its NLMSG_DONE.
func (d *dialer) receive(raw syscall.RawConn, seq uint32, fn func(*socket)) error {
	var s socket
	for {
		var n int
		var rerr error
		err := raw.Read(func(fd uintptr) bool {
			n, _, rerr = unix.Recvfrom(int(fd), d.buf, unix.MSG_DONTWAIT)
			return rerr != unix.EAGAIN // false: wait until readable
		})
		if err == nil {
			err = rerr
		}
		if err != nil {
			return fmt.Errorf("receive: %w", err)
		}
		done, err := walkMessages(d.buf[:n], seq, &s, fn)
		if err != nil || done {
			return err
		}
	}
}

// Netlink message types and header size (include/uapi/linux/netlink.h).
const (
	sizeofNlmsghdr = 16
	nlmsgError     = 2
	nlmsgDone      = 3
)

// walkMessages reads the netlink messages of one part of a dump (struct
// nlmsghdr: u32 length with the header, u16 type, u16 flags, u32 sequence,
// u32 port id; each padded to 4 bytes) and reports whether it ended the dump.
// Messages of another sequence (an earlier request's) are skipped.
func walkMessages(b []byte, seq uint32, s *socket, fn func(*socket)) (bool, error) {
	for len(b) >= sizeofNlmsghdr {
		l := int(binary.NativeEndian.Uint32(b))
		if l < sizeofNlmsghdr || l > len(b) {
			return false, fmt.Errorf("netlink message length %d of %d bytes left", l, len(b))
		}
		typ := binary.NativeEndian.Uint16(b[4:])
		msgSeq := binary.NativeEndian.Uint32(b[8:])
		body := b[sizeofNlmsghdr:l]
		b = b[min((l+3)&^3, len(b)):]
		if msgSeq != seq {
			continue
		}
		switch typ {
		case nlmsgDone:
			return true, nil
		case nlmsgError:
			if len(body) < 4 {
				return false, errors.New("netlink error message without its code")
			}
			if code := int32(binary.NativeEndian.Uint32(body)); code != 0 {
				return false, syscall.Errno(-code)
			}
			return true, nil // an acknowledgement
		case unix.SOCK_DIAG_BY_FAMILY:
			if err := parseSocket(body, s); err != nil {
				return false, err
			}
			fn(s)
		}
	}
	return false, nil
}

func familyName(f uint8) string {
	if f == unix.AF_INET6 {
		return "IPv6"
	}
	return "IPv4"
}

var errShortMessage = errors.New("inet_diag_msg shorter than its structure")

// parseSocket reads one inet_diag_msg and its attributes into s.
func parseSocket(b []byte, s *socket) error {
	if len(b) < sizeofMsg {
		return fmt.Errorf("%w: %d bytes", errShortMessage, len(b))
	}
	*s = socket{state: b[offState]}
	n := net16(b[offSport:])
	s.local = netip.AddrPortFrom(addrOf(b[0], b[offSrc:offSrc+16]), n)
	s.remote = netip.AddrPortFrom(addrOf(b[0], b[offDst:offDst+16]), net16(b[offDport:]))
	s.cookie = uint64(binary.NativeEndian.Uint32(b[offCookie:])) | uint64(binary.NativeEndian.Uint32(b[offCookie+4:]))<<32
	s.uid = binary.NativeEndian.Uint32(b[offUID:])
	s.inode = binary.NativeEndian.Uint32(b[offInode:])
	// The attributes (struct rtattr: u16 length with the header, u16 type,
	// payload padded to 4 bytes). Walked here rather than with
	// netlink.AttributeDecoder, which allocates per message: a read goes
	// through every server connection.
	for a := b[sizeofMsg:]; len(a) >= 4; {
		l := int(binary.NativeEndian.Uint16(a))
		if l < 4 || l > len(a) {
			return fmt.Errorf("inet_diag attribute length %d of %d bytes left", l, len(a))
		}
		if binary.NativeEndian.Uint16(a[2:]) == attrInfo {
			info := a[4:l]
			if len(info) >= offBytesReceived+8 {
				s.acked = binary.NativeEndian.Uint64(info[offBytesAcked:])
				s.received = binary.NativeEndian.Uint64(info[offBytesReceived:])
				s.hasInfo = true
			}
		}
		a = a[min((l+3)&^3, len(a)):]
	}
	return nil
}

func net16(b []byte) uint16 { return binary.BigEndian.Uint16(b) }

// addrOf reads an inet_diag_sockid address: IPv4 in the first 4 bytes.
func addrOf(family uint8, b []byte) netip.Addr {
	if family == unix.AF_INET {
		return netip.AddrFrom4([4]byte(b[:4]))
	}
	return netip.AddrFrom16([16]byte(b[:16]))
}

// dataOut is the data HAProxy's socket delivered to the server:
// bytes_acked less the SYN, and less the FIN once the server acknowledged it
// (FIN_WAIT2, and TIME_WAIT which has no tcp_info). A FIN sent and not yet
// acknowledged does not count in bytes_acked.
func (s *socket) dataOut() uint64 {
	ctl := uint64(1)
	if s.state == stateFinWait2 {
		ctl = 2
	}
	if s.acked < ctl {
		return 0
	}
	return s.acked - ctl
}
