// Package readlimit reads files that should be small (a configuration, a
// scenario) without trusting them to be: a wrong path (/dev/zero, a log file)
// must fail with a clear error, not eat the memory.
package readlimit

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"syscall"
)

// ErrTooLarge is returned, wrapped with the path, for a file over the limit.
var ErrTooLarge = errors.New("file too large")

// ErrNotRegular is returned, wrapped with the path and the kind of file, for
// anything but a regular file (a FIFO, a device, a directory).
var ErrNotRegular = errors.New("not a regular file")

// ReadFile reads path if it is a regular file of at most limit bytes.
//
// The file is opened non-blocking and checked on the open descriptor, not
// by a Stat before the open: opening a FIFO for reading blocks until a writer
// comes (a hung validate or run), and a path checked first could be swapped
// before the open. O_NONBLOCK changes nothing for reading a regular file.
func ReadFile(path string, limit int64) ([]byte, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("%s: %w: %s", path, ErrNotRegular, kind(fi.Mode()))
	}
	data, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, err
	}
	if int64(len(data)) > limit {
		return nil, fmt.Errorf("%s: %w (over %s)", path, ErrTooLarge, size(limit))
	}
	return data, nil
}

// size writes n in the largest binary unit that divides it.
func size(n int64) string {
	switch {
	case n >= 1<<20 && n%(1<<20) == 0:
		return fmt.Sprintf("%d MiB", n>>20)
	case n >= 1<<10 && n%(1<<10) == 0:
		return fmt.Sprintf("%d KiB", n>>10)
	}
	return fmt.Sprintf("%d bytes", n)
}

// kind names what a non-regular file is, for the error.
func kind(m fs.FileMode) string {
	switch {
	case m&fs.ModeNamedPipe != 0:
		return "a named pipe (FIFO)"
	case m&fs.ModeCharDevice != 0:
		return "a character device"
	case m&fs.ModeDevice != 0:
		return "a block device"
	case m.IsDir():
		return "a directory"
	case m&fs.ModeSocket != 0:
		return "a socket"
	}
	return m.Type().String()
}
