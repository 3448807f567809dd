//go:build ipvskernel

package kerneltest

import (
	"bytes"
	"compress/gzip"
	"fmt"
	"io"
	"path"
	"sort"
	"strings"
)

// cpioEntry is one file of the initramfs. Writing the newc format ourselves
// means device nodes (/dev/console) need no mknod, and so no root, on the host.
type cpioEntry struct {
	name  string // without leading slash
	mode  uint32 // including the type bits
	data  []byte
	major uint32 // device nodes
	minor uint32
}

const (
	modeDir  = 0o040000
	modeFile = 0o100000
	modeChr  = 0o020000
)

// initramfs holds the entries by path and adds parent directories itself.
type initramfs map[string]cpioEntry

func (fs initramfs) file(name string, perm uint32, data []byte) {
	name = strings.TrimPrefix(name, "/")
	fs.dirs(path.Dir(name))
	fs[name] = cpioEntry{name: name, mode: modeFile | perm, data: data}
}

func (fs initramfs) chr(name string, major, minor uint32) {
	name = strings.TrimPrefix(name, "/")
	fs.dirs(path.Dir(name))
	fs[name] = cpioEntry{name: name, mode: modeChr | 0o600, major: major, minor: minor}
}

func (fs initramfs) dirs(dir string) {
	for dir != "." && dir != "/" && dir != "" {
		if _, ok := fs[dir]; !ok {
			fs[dir] = cpioEntry{name: dir, mode: modeDir | 0o755}
		}
		dir = path.Dir(dir)
	}
}

// gzip returns the archive as a gzip-compressed newc cpio, parents first.
func (fs initramfs) gzip() ([]byte, error) {
	names := make([]string, 0, len(fs))
	for n := range fs {
		names = append(names, n)
	}
	sort.Strings(names) // a parent sorts before its children
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	for i, n := range names {
		if err := writeEntry(zw, fs[n], i+1); err != nil {
			return nil, err
		}
	}
	if err := writeEntry(zw, cpioEntry{name: "TRAILER!!!"}, 0); err != nil {
		return nil, err
	}
	if err := zw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

func writeEntry(w io.Writer, e cpioEntry, ino int) error {
	nlink := 1
	if e.mode&modeDir != 0 {
		nlink = 2
	}
	hdr := fmt.Sprintf("070701%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X",
		ino, e.mode, 0, 0, nlink, 0, len(e.data), 0, 0, e.major, e.minor, len(e.name)+1, 0)
	var b bytes.Buffer
	b.WriteString(hdr)
	b.WriteString(e.name)
	b.WriteByte(0)
	pad(&b)
	b.Write(e.data)
	pad(&b)
	_, err := w.Write(b.Bytes())
	return err
}

// pad aligns to 4 bytes, as newc requires after the name and after the data.
// The header is 110 bytes, so padding the buffer's length is exact.
func pad(b *bytes.Buffer) {
	for b.Len()%4 != 0 {
		b.WriteByte(0)
	}
}
