package sockdiag

import (
	"encoding/binary"
	"net/netip"
	"slices"

	"golang.org/x/sys/unix"
)

// The kernel-side filter (INET_DIAG_REQ_BYTECODE): the dump then carries only
// the sockets whose peer is one of the servers, not every TCP socket of the
// host (a balancer's client side alone is as many again as its server side).
//
// The bytecode is a list of ops (struct inet_diag_bc_op: u8 code, u8 yes,
// u16 no), some followed by an operand. The kernel runs it from the first op:
// a true condition moves on by yes bytes, a false one by no; the socket
// matches when the run ends exactly at the end of the code, and is dropped
// when it jumps past it (inet_diag_bc_run, net/ipv4/inet_diag.c). yes is one
// byte, so a match cannot jump to a far end by itself; JMP (always false)
// jumps by its 16-bit no. So each server address gets two ops:
//
//	D_COND addr/port  yes → the JMP that follows, no → the next server's D_COND
//	JMP               no → the end of the code (match)
//
// and the last D_COND's no jumps 4 bytes past the end (no match). The kernel
// audits the code on the path of the yes jumps (inet_diag_bc_audit), which
// here goes through every op.

const (
	bcJmp   = 1 // INET_DIAG_BC_JMP
	bcSCond = 7 // INET_DIAG_BC_S_COND: local address/prefix and port
	bcDCond = 8 // INET_DIAG_BC_D_COND: peer address/prefix and port

	// sizeofOp is struct inet_diag_bc_op; sizeofHostcond struct
	// inet_diag_hostcond without its address (u8 family, u8 prefix_len,
	// int port).
	sizeofOp       = 4
	sizeofHostcond = 8
)

// maxBytecode bounds the code: a JMP's no is 16 bits. 3,276 IPv4 or 2,047
// IPv6 server addresses fit; a backend with more is read unfiltered
// (filterFor returns nil).
const maxBytecode = 1<<16 - 1

// anyPort is a server address without a port (HAProxy then connects to the
// port the client connected to): any peer port matches.
const anyPort = -1

// filterFor returns the bytecode that keeps the sockets whose peer is one of
// addrs (all of family), or nil when there are none or they do not fit.
func filterFor(family uint8, addrs []netip.AddrPort) []byte {
	return buildFilter(family, addrs, nil)
}

// buildFilter returns the bytecode that keeps the sockets whose peer is one
// of peers (D_COND) or whose local address and port are one of locals
// (S_COND: the connections accepted on those listeners), all of family, in
// one program: one walk of the kernel's socket table for both. An
// unspecified address (a wildcard bind) is a hostcond of family AF_UNSPEC
// with no address, prefix 0: any address on that port (inet_diag_bc_run).
// nil when there is no address or they do not fit.
func buildFilter(family uint8, peers, locals []netip.AddrPort) []byte {
	alen := 4
	if family == unix.AF_INET6 {
		alen = 16
	}
	type cond struct {
		code byte
		ap   netip.AddrPort
		len  int // the D_COND or S_COND op with its hostcond and address
	}
	conds := make([]cond, 0, len(peers)+len(locals))
	total := 0
	for _, set := range []struct {
		code  byte
		addrs []netip.AddrPort
	}{{bcDCond, peers}, {bcSCond, locals}} {
		for _, ap := range set.addrs {
			c := cond{code: set.code, ap: ap, len: sizeofOp + sizeofHostcond + alen}
			if ap.Addr().IsUnspecified() {
				c.len = sizeofOp + sizeofHostcond
			}
			conds = append(conds, c)
			total += c.len + sizeofOp
		}
	}
	if len(conds) == 0 || total > maxBytecode {
		return nil
	}
	b := make([]byte, total)
	off := 0
	for i, c := range conds {
		pairLen := c.len + sizeofOp
		no := pairLen // to the next address's cond
		if i == len(conds)-1 {
			no = pairLen + 4 // past the end: no match
		}
		putOp(b[off:], c.code, c.len, no)
		hc := b[off+sizeofOp:]
		port := int32(c.ap.Port())
		if port == 0 {
			port = anyPort
		}
		binary.NativeEndian.PutUint32(hc[4:], uint32(port))
		if c.ap.Addr().IsUnspecified() {
			hc[0], hc[1] = unix.AF_UNSPEC, 0
		} else {
			hc[0] = family
			hc[1] = byte(alen * 8) // prefix length: the whole address
			copy(hc[sizeofHostcond:], c.ap.Addr().AsSlice())
		}
		// JMP is never true: it always moves by no, to the end.
		putOp(b[off+c.len:], bcJmp, sizeofOp, total-(off+c.len))
		off += pairLen
	}
	return b
}

func putOp(b []byte, code byte, yes, no int) {
	b[0] = code
	b[1] = byte(yes)
	binary.NativeEndian.PutUint16(b[2:], uint16(no))
}

// splitByFamily sorts the servers' addresses into IPv4 and IPv6 (an
// IPv4-mapped IPv6 address is IPv4: HAProxy connects to it over AF_INET),
// without duplicates.
func splitByFamily(addrs []netip.AddrPort) (v4, v6 []netip.AddrPort) {
	for _, ap := range addrs {
		ap = unmap(ap)
		if ap.Addr().Is4() {
			v4 = append(v4, ap)
		} else {
			v6 = append(v6, ap)
		}
	}
	cmp := func(x, y netip.AddrPort) int { return x.Compare(y) }
	slices.SortFunc(v4, cmp)
	slices.SortFunc(v6, cmp)
	return slices.Compact(v4), slices.Compact(v6)
}

func unmap(ap netip.AddrPort) netip.AddrPort {
	return netip.AddrPortFrom(ap.Addr().Unmap(), ap.Port())
}
