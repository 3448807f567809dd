// Package readlimit reads files that should be small (a configuration, a
// scenario) without trusting them to be: a wrong path (/dev/zero, a log file)
// must fail with a clear error, not eat the memory.
package readlimit

import (
	"errors"
	"fmt"
	"io"
	"os"
)

// ErrTooLarge is returned, wrapped with the path, for a file over the limit.
var ErrTooLarge = errors.New("file too large")

// ReadFile reads path if it holds at most limit bytes.
func ReadFile(path string, limit int64) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
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
