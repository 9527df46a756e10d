// Package deffiles holds what the loaders of definition folders — the slash
// command files and the agent files a workspace and the user keep — share:
// how a file found in a folder is identified without reading it, so a
// session can tell that its definitions changed; how a file is read within
// a size bound and split at its front matter; and how a file system error
// is worded in a warning that already names the file.
package deffiles

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"unicode/utf8"
)

// File is a definition file found in a folder.
type File struct {
	Path string
	Real string // Path with its symlinks resolved: what is read; "" reads Path
	Size int64
	Mod  int64 // modification time, Unix nanoseconds
}

// Of is the file at path, as info (a stat of it) describes it.
func Of(path string, info fs.FileInfo) File {
	return File{Path: path, Size: info.Size(), Mod: info.ModTime().UnixNano()}
}

// Resolve is path with its symlinks resolved, when that lies inside root
// (itself resolved); "" for root means the user's own folder, whose files
// may be anywhere. A workspace's definition file is workspace content: a
// repository that commits .acpd/commands/review.md as a symlink to
// ~/.ssh/id_rsa would have the key sent to the provider as the prompt of
// /review, so a file that resolves out of its workspace root is refused,
// whether the file itself, or a folder on its way, is the link.
func Resolve(path, root string) (string, error) {
	real, err := filepath.EvalSymlinks(path)
	if err != nil {
		return "", err
	}
	if root == "" {
		return real, nil
	}
	rr, err := filepath.EvalSymlinks(root)
	if err != nil {
		return "", err
	}
	if real != rr && !strings.HasPrefix(real, rr+string(filepath.Separator)) && rr != string(filepath.Separator) {
		return "", fmt.Errorf("it resolves to %s, outside the workspace", real)
	}
	return real, nil
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
	// Root is the workspace root holding a project folder, whose files
	// must resolve into it (Resolve); "" for the global folder.
	Root string
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
			Folder{Path: filepath.Join(r, ".claude", sub), Root: r, Claude: true},
			Folder{Path: filepath.Join(r, ".qwen", sub), Root: r},
			Folder{Path: filepath.Join(r, ".acpd", sub), Root: r},
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

// ReadText reads f, a definition file, as UTF-8 text of at most max
// bytes. Definition files are workspace input: a larger file (as listed,
// or grown since), one that cannot be read and one that is not text (a NUL
// byte, invalid UTF-8) are refused with an error that does not name the
// file, for a warning that does.
func ReadText(f File, max int64) ([]byte, error) {
	tooLarge := fmt.Errorf("file is larger than %d bytes", max)
	if f.Size > max {
		return nil, tooLarge
	}
	p := f.Path
	if f.Real != "" {
		p = f.Real
	}
	fh, err := os.Open(p)
	if err != nil {
		return nil, fmt.Errorf("cannot read: %w", Cause(err))
	}
	defer fh.Close()
	// Read at most one byte past the limit: the file may have grown since
	// it was listed.
	data, err := io.ReadAll(io.LimitReader(fh, max+1))
	if err != nil {
		return nil, fmt.Errorf("cannot read: %w", Cause(err))
	}
	if int64(len(data)) > max {
		return nil, tooLarge
	}
	if bytes.IndexByte(data, 0) >= 0 || !utf8.Valid(data) {
		return nil, errors.New("not a UTF-8 text file")
	}
	return data, nil
}

// Parts is a definition file split at its front matter.
type Parts struct {
	// Front is the front matter: the lines between a first line of "---"
	// and the next "---" line, the first of them being the file's line 2.
	Front []string
	// FrontEnd is the file line of the "---" that closes the front matter;
	// 0 when the file does not start with "---" and has no front matter.
	FrontEnd int
	// Body is the text after the front matter (the whole text without
	// one), trimmed of the white space around it.
	Body string
}

// ErrFrontMatterOpen is Split's error for a front matter without its
// closing line.
var ErrFrontMatterOpen = errors.New("front matter opened with --- is never closed")

// Split cuts a definition file's text at its front matter. A UTF-8 byte
// order mark before the text is dropped and CRLF line ends are read as LF;
// a "---" line may end in spaces or tabs.
func Split(data []byte) (Parts, error) {
	text := strings.TrimPrefix(string(data), "\ufeff")
	text = strings.ReplaceAll(text, "\r\n", "\n")
	lines := strings.Split(text, "\n")
	if !isFence(lines[0]) {
		return Parts{Body: strings.TrimSpace(text)}, nil
	}
	for i := 1; i < len(lines); i++ {
		if isFence(lines[i]) {
			return Parts{Front: lines[1:i], FrontEnd: i + 1, Body: strings.TrimSpace(strings.Join(lines[i+1:], "\n"))}, nil
		}
	}
	return Parts{}, ErrFrontMatterOpen
}

func isFence(line string) bool { return strings.TrimRight(line, " \t") == "---" }

// Unquote removes one pair of matching double or single quotes around a
// front matter value.
func Unquote(s string) string {
	if len(s) >= 2 && (s[0] == '"' && s[len(s)-1] == '"' || s[0] == '\'' && s[len(s)-1] == '\'') {
		return s[1 : len(s)-1]
	}
	return s
}
