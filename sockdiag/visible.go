package sockdiag

import (
	"errors"
	"fmt"
	"path/filepath"
	"strconv"
	"syscall"
)

// The socket table is per network namespace. A daemon that does not share
// HAProxy's (a container or sidecar with a network of its own, a daemon on
// the host while HAProxy runs in a pod) reads a table without HAProxy's
// connections: every server reads 0 bytes and 0 connections, which looks
// like an idle backend. Two ways to tell:
//   - HAProxy's /proc/<pid>/ns/net is readable (root, or CAP_SYS_PTRACE, in
//     a shared pid namespace) and is not the namespace read: Read fails at
//     once;
//   - otherwise, HAProxy says connections are open on the servers (`show
//     stat` scur) and the table has no socket at all to any of them, read
//     after read: Check says so after notVisibleAfter reads in a row (one
//     could be a race with connections closing).

// ErrNotVisible: HAProxy's connections are not in the socket table read.
// The caller logs it once and falls back to another fast signal.
var ErrNotVisible = errors.New("HAProxy's connections are not in the socket table read (another network namespace?)")

// NotVisibleError says why HAProxy's connections are taken to be invisible.
type NotVisibleError struct {
	Reason string
}

func (e *NotVisibleError) Error() string { return ErrNotVisible.Error() + ": " + e.Reason }

// Unwrap makes errors.Is(err, ErrNotVisible) true.
func (e *NotVisibleError) Unwrap() error { return ErrNotVisible }

// notVisibleAfter is how many reads in a row with sessions and no socket
// make Check fail.
const notVisibleAfter = 3

// netnsOf returns the inode of a network namespace file.
func netnsOf(path string) (uint64, error) {
	var st syscall.Stat_t
	if err := syscall.Stat(path, &st); err != nil {
		return 0, err
	}
	return st.Ino, nil
}

// readNetNS is the inode of the namespace the Reader reads.
func (r *Reader) readNetNS() (uint64, error) {
	if r.cfg.NetNS > 0 {
		var st syscall.Stat_t
		if err := syscall.Fstat(r.cfg.NetNS, &st); err != nil {
			return 0, err
		}
		return st.Ino, nil
	}
	return netnsOf(filepath.Join(r.cfg.ProcRoot, "self", "ns", "net"))
}

// sameNetNS fails with a NotVisibleError when one of pids is known to be in
// another network namespace than the one read. A namespace that cannot be
// read (no permission, another pid namespace) proves nothing.
func (r *Reader) sameNetNS(pids []int) error {
	mine, err := r.readNetNS()
	if err != nil {
		return nil
	}
	for _, pid := range pids {
		theirs, err := netnsOf(filepath.Join(r.cfg.ProcRoot, strconv.Itoa(pid), "ns", "net"))
		if err != nil {
			continue
		}
		if theirs != mine {
			return &NotVisibleError{Reason: fmt.Sprintf("HAProxy's process %d is in network namespace net:[%d], the table read is net:[%d]", pid, theirs, mine)}
		}
	}
	return nil
}

// Check compares a reading with the sessions HAProxy reports on the same
// servers (`show stat` scur, read at about the same time). It returns a
// NotVisibleError when, for notVisibleAfter checks in a row, HAProxy had
// sessions on them and the table no socket at all to their addresses;
// nil otherwise (and a check that does not find it resets the count).
func (r *Reader) Check(got TableReading, scur map[string]int) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	sessions := 0
	for name := range got.Servers {
		sessions += max(scur[name], 0)
	}
	if sessions == 0 || got.Matched > 0 {
		r.invisible = 0
		return nil
	}
	r.invisible++
	if r.invisible < notVisibleAfter {
		return nil
	}
	where := "a network namespace that cannot be named"
	if ino, err := r.readNetNS(); err == nil {
		where = fmt.Sprintf("net:[%d]", ino)
	}
	return &NotVisibleError{Reason: fmt.Sprintf("HAProxy reports %d sessions on the servers and the socket table read (%s) had no connection to any of them, %d reads in a row: is this process in HAProxy's network namespace?",
		sessions, where, r.invisible)}
}
