// Package deffiles holds what the loaders of definition folders — the slash
// command files and the agent files a workspace and the user keep — share:
// how a file found in a folder is identified without reading it, so a
// session can tell that its definitions changed, and how a file system
// error is worded in a warning that already names the file.
package deffiles

import (
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"strings"
)

// File is a definition file found in a folder.
type File struct {
	Path string
	Size int64
	Mod  int64 // modification time, Unix nanoseconds
}

// Of is the file at path, as info (a stat of it) describes it.
func Of(path string, info fs.FileInfo) File {
	return File{Path: path, Size: info.Size(), Mod: info.ModTime().UnixNano()}
}

// AppendStamp adds the file's identity (path, size, modification time) to
// a stamp: two stamps are equal when the same files are there unchanged.
func (f File) AppendStamp(b *strings.Builder) {
	fmt.Fprintf(b, "%s\x00%d\x00%d\n", f.Path, f.Size, f.Mod)
}

// Cause is err without the path of a *fs.PathError: the warning it goes
// into names the file already.
func Cause(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

// Folder is one definition folder of a session.
type Folder struct {
	Path string
	// Global is the user's folder; the others are a workspace root's.
	Global bool
	// Claude is a .claude folder: it holds the files Claude Code reads.
	Claude bool
}

// Folders lists the definition folders called sub ("commands", "agents")
// of a session, lowest precedence first: the user's global folder (global;
// "" for none), then each workspace root's .claude/sub, .qwen/sub and
// .acpd/sub, the additional roots before the first (the cwd). A later
// folder's definition replaces an earlier one of the same name, so project
// definitions win over global ones and the cwd's over other roots'.
func Folders(roots []string, global, sub string) []Folder {
	var out []Folder
	if global != "" {
		out = append(out, Folder{Path: global, Global: true})
	}
	for i := len(roots) - 1; i >= 0; i-- {
		r := roots[i]
		out = append(out,
			Folder{Path: filepath.Join(r, ".claude", sub), Claude: true},
			Folder{Path: filepath.Join(r, ".qwen", sub)},
			Folder{Path: filepath.Join(r, ".acpd", sub)},
		)
	}
	return out
}

// stamper is a found file (a loader's own type, holding a File).
type stamper interface{ AppendStamp(b *strings.Builder) }

// AppendStamps adds the files' identities to a stamp.
func AppendStamps[F stamper](b *strings.Builder, files []F) {
	for _, f := range files {
		f.AppendStamp(b)
	}
}

// Stamp identifies the files list finds in dirs by path, size and
// modification time, without reading them: a session compares stamps to
// notice that its definitions changed.
func Stamp[D any, F stamper](dirs []D, list func(D) []F) string {
	var b strings.Builder
	for _, d := range dirs {
		AppendStamps(&b, list(d))
	}
	return b.String()
}
