package instructions

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"unicode/utf8"

	"github.com/acpd/acpd/session/tokens"
)

// DefaultFileNames are the instruction files read when context.fileNames
// is not configured.
var DefaultFileNames = []string{"AGENTS.md", "QWEN.md"}

// MaxImportDepth bounds @import nesting.
const MaxImportDepth = 5

// Options configure Load.
type Options struct {
	// Roots are the session's workspace roots, the cwd first.
	Roots []string
	// FileNames replaces DefaultFileNames when non-empty.
	FileNames []string
	// GlobalDir holds the user's global instruction files (usually
	// $XDG_CONFIG_HOME/acpd); "" for none.
	GlobalDir string
	// Budget is the most bytes one file (imports included) may bring into
	// the prompt; past it the file is cut with a note. ≤ 0 means no limit.
	Budget int
}

// File is one loaded instruction file.
type File struct {
	Path      string
	Text      string // with its imports inlined
	Imports   []string
	Truncated bool
}

// Loaded is a session's instruction files, in prompt order.
type Loaded struct {
	Files []File
	// Warnings are files and imports left out, each naming its path.
	Warnings []string
}

// Load finds and reads the instruction files: the global ones, then for
// each workspace root the files from its git root (or the root itself when
// it is in no repository) down to the root, general before specific, each
// file name in FileNames order within a folder. Discovery only walks up
// from the roots, never down the tree. A file seen twice (two roots in one
// repository, a symlink) is loaded once. Nothing here fails: unreadable,
// binary or oversized input is left out or cut, with a warning.
func Load(o Options) Loaded {
	names := o.FileNames
	if len(names) == 0 {
		names = DefaultFileNames
	}
	l := &loader{opts: o, seen: map[string]bool{}}
	l.allowed = l.allowedDirs()
	if o.GlobalDir != "" {
		for _, n := range names {
			l.loadFile(filepath.Join(o.GlobalDir, n))
		}
	}
	for _, r := range o.Roots {
		for _, d := range chain(r) {
			for _, n := range names {
				l.loadFile(filepath.Join(d, n))
			}
		}
	}
	return l.out
}

// chain lists the folders from root's git root (the nearest ancestor
// holding .git) down to root; just root when it is in no repository.
func chain(root string) []string {
	root = filepath.Clean(root)
	dirs := []string{root}
	for d := root; ; {
		if _, err := os.Lstat(filepath.Join(d, ".git")); err == nil {
			return dirs
		}
		parent := filepath.Dir(d)
		if parent == d {
			return []string{root}
		}
		d = parent
		dirs = append([]string{d}, dirs...)
	}
}

// gitRoot is the first folder of chain(root).
func gitRoot(root string) string { return chain(root)[0] }

type loader struct {
	opts    Options
	allowed []string // real paths imports must stay under
	seen    map[string]bool
	out     Loaded
}

func (l *loader) warn(format string, args ...any) {
	l.out.Warnings = append(l.out.Warnings, fmt.Sprintf(format, args...))
}

// allowedDirs are the folders imports may read from: each workspace root,
// its git root (the instruction files there belong to the workspace's
// repository) and the global folder; as real paths.
func (l *loader) allowedDirs() []string {
	var out []string
	add := func(p string) {
		if p == "" {
			return
		}
		if rp, err := filepath.EvalSymlinks(p); err == nil {
			p = rp
		}
		out = append(out, filepath.Clean(p))
	}
	add(l.opts.GlobalDir)
	for _, r := range l.opts.Roots {
		add(r)
		add(gitRoot(r))
	}
	return out
}

func (l *loader) inside(real string) bool {
	for _, d := range l.allowed {
		if real == d || strings.HasPrefix(real, d+string(filepath.Separator)) {
			return true
		}
	}
	return false
}

// readText reads path as an instruction text: a regular UTF-8 text file.
// A missing file is (nil, nil): no warning.
func readText(path string, limit int) ([]byte, bool, error) {
	st, err := os.Stat(path)
	if err != nil {
		if os.IsNotExist(err) {
			return nil, false, nil
		}
		return nil, false, err
	}
	if st.IsDir() {
		return nil, false, fmt.Errorf("is a directory")
	}
	if !st.Mode().IsRegular() {
		return nil, false, fmt.Errorf("not a regular file")
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, false, err
	}
	defer f.Close()
	// A file past the budget is read up to it (and a little more, to cut
	// at a line end), never whole.
	r := io.Reader(f)
	if limit > 0 {
		r = io.LimitReader(f, int64(limit)+1)
	}
	data, err := io.ReadAll(r)
	if err != nil {
		return nil, false, err
	}
	cut := limit > 0 && len(data) > limit
	if cut {
		data = data[:limit]
		// Drop a rune cut in two by the limit.
		for i := 0; i < utf8.UTFMax && len(data) > 0 && !utf8.Valid(data); i++ {
			data = data[:len(data)-1]
		}
	}
	if bytes.IndexByte(data, 0) >= 0 || !utf8.Valid(data) {
		return nil, false, fmt.Errorf("binary file (not UTF-8 text)")
	}
	return data, cut, nil
}

func (l *loader) loadFile(path string) {
	real, err := filepath.EvalSymlinks(path)
	if err != nil {
		if !os.IsNotExist(err) {
			l.warn("%s: instruction file skipped: %v", path, err)
		}
		return
	}
	if l.seen[real] {
		return
	}
	data, cut, err := readText(path, l.opts.Budget)
	if err != nil {
		l.warn("%s: instruction file skipped: %v", path, err)
		return
	}
	if data == nil {
		return
	}
	l.seen[real] = true
	f := File{Path: path, Truncated: cut}
	text := strings.TrimSpace(string(data))
	text = l.expand(text, filepath.Dir(path), []string{real}, &f)
	if l.opts.Budget > 0 && len(text) > l.opts.Budget {
		text = cutAt(text, l.opts.Budget)
		f.Truncated = true
	}
	if f.Truncated {
		text += fmt.Sprintf("\n\n[acpd: the rest of %s was cut: instruction files are limited to about %d tokens each (10%% of the context window).]", path, tokens.Bytes(l.opts.Budget))
		l.warn("%s: instruction file cut to the size budget of %d bytes", path, l.opts.Budget)
	}
	f.Text = text
	l.out.Files = append(l.out.Files, f)
}

// cutAt cuts s to at most n bytes, at a line end when one is near.
func cutAt(s string, n int) string {
	if len(s) <= n {
		return s
	}
	s = s[:n]
	for !utf8.ValidString(s) {
		s = s[:len(s)-1]
	}
	if i := strings.LastIndexByte(s, '\n'); i > n/2 {
		s = s[:i]
	}
	return s
}

// importRe finds @path tokens: at a line start or after whitespace, the
// path starting with '.', '/', '~' or a letter or digit.
var importRe = regexp.MustCompile(`(^|\s)@([./A-Za-z0-9_~][^\s` + "`" + `]*)`)

// expand inlines the @imports of text (a file in dir). stack holds the
// real paths being expanded, outermost first: an import already on it is a
// cycle and is stopped. Imports inside fenced code blocks and code spans
// are left alone; so is an @word that names no file.
func (l *loader) expand(text, dir string, stack []string, f *File) string {
	lines := strings.Split(text, "\n")
	fence := ""
	for i, line := range lines {
		t := strings.TrimSpace(line)
		if fence != "" {
			if strings.HasPrefix(t, fence) {
				fence = ""
			}
			continue
		}
		if strings.HasPrefix(t, "```") || strings.HasPrefix(t, "~~~") {
			fence = t[:3]
			continue
		}
		if !strings.Contains(line, "@") {
			continue
		}
		// Even segments between backticks are outside code spans.
		segs := strings.Split(line, "`")
		for j := 0; j < len(segs); j += 2 {
			segs[j] = importRe.ReplaceAllStringFunc(segs[j], func(m string) string {
				lead := m[:len(m)-len(strings.TrimLeftFunc(m, isSpace))]
				tok := strings.TrimLeftFunc(m, isSpace)[1:]
				return lead + l.importOne(tok, dir, stack, f)
			})
		}
		lines[i] = strings.Join(segs, "`")
	}
	return strings.Join(lines, "\n")
}

func isSpace(r rune) bool { return r == ' ' || r == '\t' || r == '\r' || r == '\n' }

// importOne returns what replaces the token @tok.
func (l *loader) importOne(tok, dir string, stack []string, f *File) string {
	orig := "@" + tok
	p := strings.TrimRight(tok, ".,;:!?)")
	if strings.Contains(p, "://") || p == "" {
		return orig
	}
	if strings.HasPrefix(p, "~/") {
		home, err := os.UserHomeDir()
		if err != nil {
			return orig
		}
		p = filepath.Join(home, p[2:])
	} else if !filepath.IsAbs(p) {
		p = filepath.Join(dir, p)
	}
	rest := tok[len(strings.TrimRight(tok, ".,;:!?)")):]
	real, err := filepath.EvalSymlinks(p)
	if err != nil {
		return orig // names no file: ordinary text
	}
	if st, err := os.Stat(real); err != nil || st.IsDir() {
		return orig
	}
	if !l.inside(real) {
		l.warn("%s: import of %s skipped: it is outside the workspace and the global instruction folder", stack[len(stack)-1], p)
		return fmt.Sprintf("<!-- import skipped: %s is outside the workspace -->", p) + rest
	}
	for _, s := range stack {
		if s == real {
			l.warn("%s: import of %s skipped: import cycle", stack[len(stack)-1], p)
			return fmt.Sprintf("<!-- import cycle stopped: %s -->", p) + rest
		}
	}
	if len(stack) > MaxImportDepth {
		l.warn("%s: import of %s skipped: more than %d levels of imports", stack[len(stack)-1], p, MaxImportDepth)
		return fmt.Sprintf("<!-- import not followed: %s is more than %d levels deep -->", p, MaxImportDepth) + rest
	}
	data, _, err := readText(real, l.opts.Budget)
	if err != nil {
		l.warn("%s: import of %s skipped: %v", stack[len(stack)-1], p, err)
		return fmt.Sprintf("<!-- import skipped: %s: %v -->", p, err) + rest
	}
	f.Imports = append(f.Imports, p)
	body := l.expand(strings.TrimSpace(string(data)), filepath.Dir(real), append(stack, real), f)
	return fmt.Sprintf("\n<!-- Imported from: %s -->\n%s\n<!-- End of import from: %s -->\n", p, body, p) + rest
}

// Text renders the loaded files for the system prompt, each marked with
// its path; "" when none was loaded.
func (l Loaded) Text() string {
	if len(l.Files) == 0 {
		return ""
	}
	var b strings.Builder
	b.WriteString("# Project instructions\nThe user and the project keep these instructions for agents; follow them. Later files are more specific than earlier ones and win where they differ.\n")
	for _, f := range l.Files {
		fmt.Fprintf(&b, "\n--- Context from: %s ---\n%s\n--- End of Context from: %s ---\n", f.Path, f.Text, f.Path)
	}
	return strings.TrimRight(b.String(), "\n")
}
