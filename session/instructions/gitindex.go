package instructions

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
)

// A repository above a workspace root counts as the root's repository only
// when it tracks something under the root. A dotfiles repository at ~/.git
// holds every folder of the home directory in its work tree, yet a project
// folder below it that has no .git of its own is not its content: taking ~
// for that project's git root would read ~/AGENTS.md, let imports reach
// ~/.aws, and put the dotfiles' status and commits in the prompt. Asking git
// would run it for every session before the environment block does; the
// index answers the same question without a process: it lists every tracked
// path, sorted, so a root is tracked when an entry starts with its path.

// maxIndexBytes bounds how much of an index is read (a large monorepo's
// index is tens of megabytes; nothing legitimate comes near this).
const maxIndexBytes = 256 << 20

var errIndexFormat = errors.New("not a git index this reader knows")

// tracksUnder reports whether the repository whose work tree is top tracks
// a path under rel (a folder, slash-separated, relative to top). Anything
// it cannot read or parse counts as "no": the root is then its own
// project, which only loads less.
func tracksUnder(top, rel string) bool {
	gitDir, err := gitFolder(top)
	if err != nil {
		return false
	}
	f, err := os.Open(filepath.Join(gitDir, "index"))
	if err != nil {
		return false
	}
	defer f.Close()
	found, err := indexHasPrefix(bufio.NewReaderSize(io.LimitReader(f, maxIndexBytes), 64<<10), rel+"/", hashSize(gitDir))
	return err == nil && found
}

// hashSize is the object id length of the repository: 32 bytes for a
// SHA-256 repository (extensions.objectFormat), else 20.
func hashSize(gitDir string) int {
	b, err := os.ReadFile(filepath.Join(gitDir, "config"))
	if err != nil || len(b) > 1<<20 {
		return 20
	}
	for line := range strings.SplitSeq(strings.ToLower(string(b)), "\n") {
		k, v, ok := strings.Cut(line, "=")
		if ok && strings.TrimSpace(k) == "objectformat" && strings.TrimSpace(v) == "sha256" {
			return 32
		}
	}
	return 20
}

// indexHasPrefix reads index entries (format versions 2 to 4) until one
// whose path starts with prefix, or one sorted past it.
func indexHasPrefix(r *bufio.Reader, prefix string, hashLen int) (bool, error) {
	var hdr [12]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil || string(hdr[:4]) != "DIRC" {
		return false, errIndexFormat
	}
	version := binary.BigEndian.Uint32(hdr[4:8])
	count := binary.BigEndian.Uint32(hdr[8:12])
	if version < 2 || version > 4 {
		return false, errIndexFormat
	}
	fixed := 40 + hashLen + 2 // stat data, object id, flags
	entry := make([]byte, fixed+2)
	var path []byte
	for range count {
		if _, err := io.ReadFull(r, entry[:fixed]); err != nil {
			return false, errIndexFormat
		}
		flags := binary.BigEndian.Uint16(entry[fixed-2 : fixed])
		n := fixed
		if version >= 3 && flags&0x4000 != 0 {
			if _, err := io.ReadFull(r, entry[fixed:fixed+2]); err != nil {
				return false, errIndexFormat
			}
			n += 2
		}
		if version == 4 {
			strip, err := binary.ReadUvarint(r)
			if err != nil || strip > uint64(len(path)) {
				return false, errIndexFormat
			}
			path = path[:len(path)-int(strip)]
		} else {
			path = path[:0]
		}
		name, err := readName(r, 1<<16-len(path))
		if err != nil {
			return false, errIndexFormat
		}
		path = append(path, name[:len(name)-1]...)
		n += len(name)
		if version < 4 {
			// Entries are padded with NULs to a multiple of eight bytes;
			// the path's own NUL is the first of them.
			if _, err := r.Discard((8 - n%8) % 8); err != nil {
				return false, errIndexFormat
			}
		}
		if bytes.HasPrefix(path, []byte(prefix)) {
			return true, nil
		}
		if string(path) > prefix {
			return false, nil // sorted: nothing later starts with prefix
		}
	}
	return false, nil
}

// readName reads an entry's NUL-terminated name of at most max bytes: an
// index without the NUL must not make the reader hold the rest of the file.
func readName(r *bufio.Reader, max int) ([]byte, error) {
	var name []byte
	for {
		b, err := r.ReadSlice(0)
		if len(name)+len(b) > max+1 {
			return nil, errIndexFormat
		}
		name = append(name, b...)
		if !errors.Is(err, bufio.ErrBufferFull) {
			return name, err
		}
	}
}
