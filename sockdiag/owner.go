package sockdiag

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// Which sockets to a server's address are HAProxy's. Another process can
// hold connections to the same address (a health checker, a monitoring
// probe, the operator's curl); counted, they would skew the reading.
//
// Precise: the socket's inode is one of HAProxy's open files
// (/proc/<pid>/fd/* → "socket:[inode]"). HAProxy's worker drops its
// privileges and is then not dumpable, so only root or CAP_SYS_PTRACE may
// list its descriptors.
//
// Fallback: the socket's uid (the uid that created it) is HAProxy's
// (/proc/<pid>/status, readable by anyone). It cannot tell HAProxy from any
// other process of the same uid: with HAProxy as root (no `user` in its
// global section, common in containers), every root process; with a
// dedicated user, a second HAProxy under the same user.
//
// Neither: HAProxy's pid is not visible from here (another pid namespace:
// a sidecar without shareProcessNamespace) or not known. Every socket to the
// servers counts; in a pod that is HAProxy and whatever else in the pod
// connects to the servers.
//
// Neither tells HAProxy's health checks (its own sockets) from its traffic:
// a check connection lives milliseconds and is rarely open at a read.

// Ownership says how a reading told HAProxy's sockets from others'.
type Ownership string

// How sockets are told apart.
const (
	// OwnerInode: the socket's inode is among HAProxy's open files.
	OwnerInode Ownership = "inode"
	// OwnerUID: the socket belongs to HAProxy's uid.
	OwnerUID Ownership = "uid"
	// OwnerAny: every socket to a server address counts.
	OwnerAny Ownership = "any"
)

// owner decides which sockets are HAProxy's, for one read.
type owner struct {
	how  Ownership
	why  string // why not a more precise way ("" for inode)
	uids map[uint32]bool
	// pids are HAProxy's processes whose descriptors are listed (inode).
	pids []int
}

// resolveOwner finds how sockets can be told apart for pids (HAProxy's
// processes), as precisely as this process may: inode, else uid, else any.
// force, when not "", caps the precision (a test, or an operator who wants
// to save the descriptor scans).
func resolveOwner(procRoot string, pids []int, force Ownership) owner {
	if len(pids) == 0 {
		return owner{how: OwnerAny, why: "HAProxy's pid is not known"}
	}
	o := owner{how: OwnerInode, uids: map[uint32]bool{}}
	for _, pid := range pids {
		dir := filepath.Join(procRoot, strconv.Itoa(pid))
		uid, err := fsUID(filepath.Join(dir, "status"))
		if err != nil {
			return owner{how: OwnerAny, why: fmt.Sprintf("HAProxy's process %d is not visible here (another pid namespace?): %v", pid, err)}
		}
		o.uids[uid] = true
		if o.how == OwnerInode && force != OwnerUID {
			if err := canList(filepath.Join(dir, "fd")); err != nil {
				o.how, o.why = OwnerUID, fmt.Sprintf("HAProxy's descriptors are not readable (needs root or CAP_SYS_PTRACE): %v", err)
			}
		}
	}
	if force == OwnerUID && o.how == OwnerInode {
		o.how, o.why = OwnerUID, "asked for uid"
	}
	if force == OwnerAny {
		return owner{how: OwnerAny, why: "asked for any"}
	}
	if o.how == OwnerInode {
		o.pids = pids
	}
	return o
}

// canList checks that a descriptor directory can be listed, reading one
// entry only (a full listing is thousands on a busy HAProxy).
func canList(dir string) error {
	f, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer f.Close()
	_, err = f.ReadDir(1)
	return err
}

// fsUID reads the filesystem uid (the fourth Uid: field) of a process's
// status file: what a socket it creates is owned by.
func fsUID(status string) (uint32, error) {
	f, err := os.Open(status)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line, ok := strings.CutPrefix(sc.Text(), "Uid:")
		if !ok {
			continue
		}
		fields := strings.Fields(line)
		if len(fields) != 4 {
			return 0, fmt.Errorf("%s: Uid line %q: want 4 fields", status, sc.Text())
		}
		u, err := strconv.ParseUint(fields[3], 10, 32)
		if err != nil {
			return 0, fmt.Errorf("%s: Uid line %q: %w", status, sc.Text(), err)
		}
		return uint32(u), nil
	}
	if err := sc.Err(); err != nil {
		return 0, fmt.Errorf("%s: %w", status, err)
	}
	return 0, fmt.Errorf("%s: no Uid line", status)
}

// inodeSet is which socket inodes are HAProxy's, kept across reads: an inode
// names one socket while it lives, and a socket is in the table only once
// connected, after its descriptor was opened, so a socket classified once
// stays so. HAProxy's descriptors are listed again only when a read meets an
// inode not classified yet (new connections), once during the dump and at
// most once more after it (below); inodes gone from the table are forgotten.
//
// A dump is not one instant: the kernel sends it in parts (about a hundred
// server connections each) and walks the socket table again for each, after
// the listing that the first new inode started. A connection HAProxy opened
// after that listing, met in a later part, is not in it, and classified then
// it would be another process's for its whole life: bytes and sessions of
// one of HAProxy's connections left out of its server (measured: 9 of 440
// connections, with 13 new a second, each for as long as it lived). Such
// inodes are left unsure and settled by a second listing once the dump has
// ended (settle), which the Reader makes only when a read met one.
type inodeSet struct {
	known   map[uint32]bool // inode → HAProxy's
	seen    map[uint32]bool // inodes met in the current read
	unsure  []uint32        // met after the current read's listing, not in it
	scanned bool            // HAProxy's descriptors were listed in this read
	scans   int             // descriptor listings made (for tests and benchmarks)
}

func newInodeSet() *inodeSet {
	return &inodeSet{known: map[uint32]bool{}, seen: map[uint32]bool{}}
}

// owned reports whether inode is one of HAProxy's sockets, listing pids'
// descriptors when the inode is new. A socket HAProxy closed between the
// dump and the listing is taken for another process's: it was closing. sure
// is false for a new inode met after this read's listing and not in it: it
// may have been opened since, and settle decides.
func (s *inodeSet) owned(ctx context.Context, procRoot string, pids []int, inode uint32) (mine, sure bool, err error) {
	s.seen[inode] = true
	if v, ok := s.known[inode]; ok {
		return v, true, nil
	}
	if s.scanned {
		s.unsure = append(s.unsure, inode)
		return false, false, nil
	}
	if err := s.scan(ctx, procRoot, pids); err != nil {
		return false, false, err
	}
	s.scanned = true
	v := s.known[inode]
	s.known[inode] = v
	return v, true, nil
}

// settle classifies the inodes owned left unsure by listing pids'
// descriptors again, after the dump met them: HAProxy's are listed now
// unless closed meanwhile. It reports each one's classification.
func (s *inodeSet) settle(ctx context.Context, procRoot string, pids []int) (map[uint32]bool, error) {
	if len(s.unsure) == 0 {
		return nil, nil
	}
	if err := s.scan(ctx, procRoot, pids); err != nil {
		return nil, err
	}
	out := make(map[uint32]bool, len(s.unsure))
	for _, ino := range s.unsure {
		v := s.known[ino]
		s.known[ino], out[ino] = v, v
	}
	s.unsure = s.unsure[:0]
	return out, nil
}

// scan lists the socket descriptors of pids into known.
func (s *inodeSet) scan(ctx context.Context, procRoot string, pids []int) error {
	s.scans++
	buf := make([]byte, 64)
	for _, pid := range pids {
		dir := filepath.Join(procRoot, strconv.Itoa(pid), "fd")
		ents, err := os.ReadDir(dir)
		if errors.Is(err, fs.ErrNotExist) {
			continue // an old worker that exited since its pid was read: its sockets are gone too
		}
		if err != nil {
			return fmt.Errorf("list HAProxy's descriptors: %w", err)
		}
		for i, e := range ents {
			if i%1024 == 0 && ctx.Err() != nil {
				return fmt.Errorf("list HAProxy's descriptors: %w", ctx.Err())
			}
			n, err := syscall.Readlink(dir+"/"+e.Name(), buf)
			if err != nil {
				if errors.Is(err, fs.ErrNotExist) {
					continue // closed meanwhile
				}
				return fmt.Errorf("list HAProxy's descriptors: %s: %w", e.Name(), err)
			}
			if ino, ok := socketInode(buf[:n]); ok {
				s.known[ino] = true
			}
		}
	}
	return nil
}

// socketInode parses "socket:[12345]".
func socketInode(link []byte) (uint32, bool) {
	rest, ok := bytes.CutPrefix(link, []byte("socket:["))
	if !ok || len(rest) < 2 || rest[len(rest)-1] != ']' {
		return 0, false
	}
	v, err := strconv.ParseUint(string(rest[:len(rest)-1]), 10, 32)
	return uint32(v), err == nil
}

// endRead forgets the inodes the read did not meet (HAProxy's client-side
// sockets the listing added, closed connections).
func (s *inodeSet) endRead() {
	for k := range s.known {
		if !s.seen[k] {
			delete(s.known, k)
		}
	}
	clear(s.seen)
	s.unsure = s.unsure[:0]
	s.scanned = false
}
