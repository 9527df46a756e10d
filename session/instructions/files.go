package instructions

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/acpd/acpd/session/tokens"
)

// DefaultFileNames are the instruction files read when context.fileNames
// is not configured.
var DefaultFileNames = []string{"AGENTS.md", "QWEN.md"}

// MaxImportDepth bounds @import nesting.
const MaxImportDepth = 5

// WindowShare is the part of the model's context window that all
// instruction files together (imports included) may fill. Decision: 15%,
// the share at which qwen-code starts warning that its context files are
// large; acpd cuts there instead of only warning, so the system prompt
// cannot crowd out the conversation: with the default compaction threshold
// of 85%, about 70% of the window is left for the conversation itself.
// Earlier acpd gave each file a tenth of the window, which let a handful of
// files fill half of it.
const WindowShare = 0.15

// BudgetFor is the instruction budget in bytes for a window of the given
// tokens: WindowShare of it, as bytes of text.
func BudgetFor(window int) int { return tokens.ToBytes(int(float64(window) * WindowShare)) }

// Limits of one Load, whatever the budget: they bound what a hostile or
// mistaken repository can make acpd do (an @import fan-out, thousands of
// @words) to milliseconds of work. Generous for real projects, which
// import a handful of files.
const (
	// maxFilesRead is the most distinct files one Load reads.
	maxFilesRead = 128
	// maxLookups is the most distinct @paths one Load looks up.
	maxLookups = 2048
	// readShares is how many whole budgets one Load may read: enough for
	// four files each filling the share before the files are fitted into it.
	readShares = 4
	// unlimitedRead bounds the bytes read when there is no budget.
	unlimitedRead = 16 << 20
)

// Options configure Load.
type Options struct {
	// Roots are the session's workspace roots, the cwd first.
	Roots []string
	// FileNames replaces DefaultFileNames when non-empty.
	FileNames []string
	// GlobalDir holds the user's global instruction files (usually
	// $XDG_CONFIG_HOME/acpd); "" for none.
	GlobalDir string
	// Budget is the most bytes all files together (imports included) may
	// bring into the prompt (see BudgetFor); past it files are cut with a
	// note. ≤ 0 means no limit.
	Budget int
}

// File is one loaded instruction file.
type File struct {
	Path      string
	Text      string // with its imports inlined
	Imports   []string
	Truncated bool
}

// Loaded is a session's instruction files, in prompt order. It is not
// changed once Load returns, so sessions may share one.
type Loaded struct {
	Files []File
	// Warnings are files and imports left out or cut, each naming its path.
	Warnings []string
	// Sources are the paths whose change could change the result: every
	// place an instruction file is looked for, and every file read (as
	// named and as resolved).
	Sources []string
}

// Load finds and reads the instruction files: the global ones, then for
// each workspace root the files from its git root (or the root itself when
// it is in no repository) down to the root, general before specific, each
// file name in FileNames order within a folder. Discovery only walks up
// from the roots, never down the tree. Nothing here fails: unreadable,
// binary or oversized input is left out or cut, with a warning.
//
// Each file's text enters the prompt once: a file seen twice (two roots in
// one repository, a symlink, a file imported again) is read once, and a
// repeated @import becomes a short marker, as in qwen-code ("File already
// processed"). Decision: acpd applies this across the whole load rather
// than per top-level file, since all files land in the same system prompt.
// The budget (Options.Budget, the files read, the paths looked up, the
// bytes read) is checked while expanding, so an import fan-out stops at it
// rather than being built and cut afterwards. Load stops early, returning
// what it has, when ctx ends.
func Load(ctx context.Context, o Options) Loaded {
	names := o.FileNames
	if len(names) == 0 {
		names = DefaultFileNames
	}
	l := &loader{ctx: ctx, opts: o, included: map[string]bool{}, files: map[string]*fileData{},
		lookups: map[string]lookup{}, repeats: map[string]int{}, sources: map[string]bool{}}
	l.readLeft = l.readLimit()
	chains := make([][]string, len(o.Roots))
	for i, r := range o.Roots {
		chains[i] = chain(r)
	}
	l.allowed = l.allowedDirs(chains)
	if o.GlobalDir != "" {
		for _, n := range names {
			l.loadFile(filepath.Join(o.GlobalDir, n), true)
		}
	}
	for _, c := range chains {
		for _, d := range c {
			for _, n := range names {
				l.loadFile(filepath.Join(d, n), false)
			}
		}
	}
	l.fit()
	for _, p := range slices.Sorted(maps.Keys(l.repeats)) {
		l.warn("%s: imported %d more times; its text is included once", p, l.repeats[p])
	}
	l.out.Sources = slices.Sorted(maps.Keys(l.sources))
	return l.out
}

// chain lists the folders from root's git root (the nearest ancestor
// holding .git) down to root; just root when it is in no repository, or
// when the repository above does not track anything under root (see
// tracksUnder: a dotfiles repository in the home folder is not the git
// root of every project below it).
func chain(root string) []string {
	root = filepath.Clean(root)
	dirs := []string{root}
	for d := root; ; {
		if _, err := os.Lstat(filepath.Join(d, ".git")); err == nil {
			if d != root {
				rel, err := filepath.Rel(d, root)
				if err != nil || !tracksUnder(d, filepath.ToSlash(rel)) {
					return []string{root}
				}
			}
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

// gitRoot is the first folder of chain(root): the root's git root, or
// the root itself.
func gitRoot(root string) string { return chain(root)[0] }

// fileData is a file's content, read once per load.
type fileData struct {
	data []byte
	cut  bool // the read stopped at the budget
	err  error
}

// lookup is what an @path names, looked up once per load.
type lookup struct {
	real string // "" when it names no regular file
}

type loader struct {
	ctx      context.Context
	opts     Options
	allowed  []string        // the workspace's folders, as real paths (allowedDirs)
	global   string          // the global folder, as a real path; "" for none
	included map[string]bool // real paths whose text is in the prompt
	files    map[string]*fileData
	lookups  map[string]lookup
	repeats  map[string]int // import path → repeats turned into markers
	sources  map[string]bool
	readLeft int  // bytes the load may still read
	stopped  bool // a load-wide limit was reached (warned once)
	out      Loaded
}

func (l *loader) warn(format string, args ...any) {
	l.out.Warnings = append(l.out.Warnings, fmt.Sprintf(format, args...))
}

// stop records that a load-wide limit was reached: the rest of the
// imports are left as text, with one warning.
func (l *loader) stop(format string, args ...any) {
	if !l.stopped {
		l.stopped = true
		l.warn(format, args...)
	}
}

// allowedDirs are the folders of the workspace, as real paths: each root
// and its git root (the instruction files there belong to the workspace's
// repository). Instruction files and their imports must resolve into them
// — or, for imports, be a Markdown file of the global folder (inGlobal).
func (l *loader) allowedDirs(chains [][]string) []string {
	var out []string
	for i, r := range l.opts.Roots {
		out = append(out, realDir(r), realDir(chains[i][0]))
	}
	if l.opts.GlobalDir != "" {
		l.global = realDir(l.opts.GlobalDir)
	}
	return out
}

// realDir is dir with its symlinks resolved (as given when it cannot be).
func realDir(dir string) string {
	if rp, err := filepath.EvalSymlinks(dir); err == nil {
		dir = rp
	}
	return filepath.Clean(dir)
}

// inside reports whether real lies in the workspace.
func (l *loader) inside(real string) bool {
	for _, d := range l.allowed {
		if within(d, real) {
			return true
		}
	}
	return false
}

// inGlobal reports whether real is a Markdown file of the global folder:
// the user's instruction files, and nothing else kept there
// (config.toml, whatever a tool stored next to it).
func (l *loader) inGlobal(real string) bool {
	return l.global != "" && within(l.global, real) && strings.EqualFold(filepath.Ext(real), ".md")
}

func within(dir, p string) bool {
	return p == dir || strings.HasPrefix(p, dir+string(filepath.Separator)) || dir == string(filepath.Separator)
}

// read returns the content of the regular file real, reading it at most
// once per load and never past the load's limits; nil once a limit is
// reached (warned once, naming from, the file that wanted more).
func (l *loader) read(real, from string) *fileData {
	if fd, ok := l.files[real]; ok {
		return fd
	}
	switch {
	case len(l.files) >= maxFilesRead:
		l.stop("%s: more than %d files read for the instructions; the rest of the imports are left as text", from, maxFilesRead)
		return nil
	case l.readLeft <= 0:
		l.stop("%s: the instructions read their limit of %d bytes; the rest of the imports are left as text", from, l.readLimit())
		return nil
	}
	limit := l.readLeft
	if l.opts.Budget > 0 {
		limit = min(limit, l.opts.Budget)
	}
	fd := &fileData{}
	fd.data, fd.cut, fd.err = readText(real, limit)
	l.readLeft -= len(fd.data)
	l.files[real] = fd
	return fd
}

// readLimit is the most bytes one load reads.
func (l *loader) readLimit() int {
	if l.opts.Budget > 0 {
		return readShares * l.opts.Budget
	}
	return unlimitedRead
}

// readText reads path as an instruction text: a regular UTF-8 text file,
// at most limit bytes of it. A missing file is (nil, nil): no warning.
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
	// A file past the limit is read up to it (and one byte more, to know),
	// never whole.
	data, err := io.ReadAll(io.LimitReader(f, int64(limit)+1))
	if err != nil {
		return nil, false, err
	}
	cut := len(data) > limit
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

// loadFile loads the instruction file at path: one of the user's global
// ones, or one of the workspace that must resolve into the workspace. A
// repository can commit AGENTS.md as a symlink to ../../.ssh/id_rsa; read,
// it would go to the provider in the first request of every session, with
// no tool call and no question.
func (l *loader) loadFile(path string, global bool) {
	l.sources[path] = true
	if l.ctx.Err() != nil {
		return
	}
	real, err := filepath.EvalSymlinks(path)
	if err != nil {
		if !os.IsNotExist(err) {
			l.warn("%s: instruction file skipped: %v", path, err)
		}
		return
	}
	l.sources[real] = true
	if !global && !l.inside(real) {
		l.warn("%s: instruction file skipped: it resolves to %s, outside the workspace", path, real)
		return
	}
	if l.included[real] {
		return // already in the prompt (another root, or imported)
	}
	fd := l.read(real, path)
	if fd == nil {
		return
	}
	if fd.err != nil {
		l.warn("%s: instruction file skipped: %v", path, fd.err)
		return
	}
	if fd.data == nil {
		return
	}
	l.included[real] = true
	f := File{Path: path, Truncated: fd.cut}
	b := &capped{limit: l.opts.Budget}
	l.expand(b, strings.TrimSpace(string(fd.data)), filepath.Dir(path), []string{real}, &f)
	f.Truncated = f.Truncated || b.full
	f.Text = b.String()
	l.out.Files = append(l.out.Files, f)
}

// capped is a builder that keeps at most limit bytes (no limit when ≤ 0);
// full says that something did not fit.
type capped struct {
	strings.Builder
	limit int
	full  bool
}

// add writes s, or as much of it as fits; false once full.
func (b *capped) add(s string) bool {
	if b.full {
		return false
	}
	if b.limit > 0 && b.Len()+len(s) > b.limit {
		b.WriteString(s[:b.limit-b.Len()])
		b.full = true
		return false
	}
	b.WriteString(s)
	return true
}

// fit cuts the files so that together they stay within the budget. Each
// file gets an equal part of it, and what a smaller file leaves unused
// goes to the larger ones; so one oversized file (the user's global one,
// or a repository's) cannot push the others out.
func (l *loader) fit() {
	budget := l.opts.Budget
	fs := l.out.Files
	total := 0
	for _, f := range fs {
		total += len(f.Text)
	}
	if budget > 0 && total > budget {
		order := make([]int, len(fs))
		for i := range order {
			order[i] = i
		}
		slices.SortStableFunc(order, func(a, b int) int { return len(fs[a].Text) - len(fs[b].Text) })
		left := budget
		for k, i := range order {
			share := left / (len(order) - k)
			if len(fs[i].Text) > share {
				fs[i].Text = cutAt(fs[i].Text, share)
				fs[i].Truncated = true
			}
			left -= len(fs[i].Text)
		}
	}
	for i := range fs {
		f := &fs[i]
		if !f.Truncated {
			continue
		}
		f.Text = cutAt(f.Text, len(f.Text))
		if budget <= 0 {
			f.Text += fmt.Sprintf("\n\n[acpd: the rest of %s was not read: instruction files are read up to %d bytes.]", f.Path, unlimitedRead)
			l.warn("%s: instruction file cut at the read limit of %d bytes", f.Path, unlimitedRead)
			continue
		}
		f.Text += fmt.Sprintf("\n\n[acpd: the rest of %s was cut: instruction files together are limited to about %d tokens (%d%% of the context window).]",
			f.Path, tokens.Bytes(budget), int(WindowShare*100))
		l.warn("%s: instruction file cut to fit the instruction budget of %d bytes (%d%% of the context window)", f.Path, budget, int(WindowShare*100))
	}
}

// cutAt cuts s to at most n bytes, at a line end when one is near, never
// inside a rune.
func cutAt(s string, n int) string {
	if len(s) > n {
		s = s[:n]
		if i := strings.LastIndexByte(s, '\n'); i > n/2 {
			s = s[:i]
		}
	}
	for !utf8.ValidString(s) {
		s = s[:len(s)-1]
	}
	return s
}

// importRe finds @path tokens: at a line start or after whitespace, the
// path starting with '.', '/', '~' or a letter or digit.
var importRe = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`(^|\s)@([./A-Za-z0-9_~][^\s` + "`" + `]*)`) })

// expand writes text (a file in dir) to b with its @imports inlined; false
// when it had to stop (b is full or ctx ended). stack holds the real paths
// being expanded, outermost first: an import already on it is a cycle and
// is stopped. Imports inside fenced code blocks and code spans are left
// alone; so is an @word that names no file.
func (l *loader) expand(b *capped, text, dir string, stack []string, f *File) bool {
	fence := ""
	for line := range strings.SplitAfterSeq(text, "\n") {
		t := strings.TrimSpace(line)
		switch {
		case fence != "":
			if strings.HasPrefix(t, fence) {
				fence = ""
			}
		case strings.HasPrefix(t, "```") || strings.HasPrefix(t, "~~~"):
			fence = t[:3]
		case strings.Contains(line, "@"):
			// Even segments between backticks are outside code spans.
			for j, seg := range strings.Split(line, "`") {
				if j > 0 && !b.add("`") {
					return false
				}
				if j%2 == 1 {
					if !b.add(seg) {
						return false
					}
					continue
				}
				if !l.expandSegment(b, seg, dir, stack, f) {
					return false
				}
			}
			continue
		}
		if !b.add(line) {
			return false
		}
	}
	return true
}

// expandSegment writes seg (text outside code) with its imports inlined.
func (l *loader) expandSegment(b *capped, seg, dir string, stack []string, f *File) bool {
	last := 0
	for _, m := range importRe().FindAllStringSubmatchIndex(seg, -1) {
		// m[4]:m[5] is the path after '@'.
		if !b.add(seg[last : m[4]-1]) {
			return false
		}
		last = m[5]
		if !l.importOne(b, seg[m[4]:m[5]], dir, stack, f) {
			return false
		}
	}
	return b.add(seg[last:])
}

// resolve looks up what the @path p (in from) names, once per load.
func (l *loader) resolve(p, from string) (lookup, bool) {
	if lk, ok := l.lookups[p]; ok {
		return lk, true
	}
	if len(l.lookups) >= maxLookups {
		l.stop("%s: more than %d @paths looked up for the instructions; the rest are left as text", from, maxLookups)
		return lookup{}, false
	}
	var lk lookup
	if real, err := filepath.EvalSymlinks(p); err == nil {
		if st, err := os.Stat(real); err == nil && st.Mode().IsRegular() {
			lk.real = real
		}
	}
	l.lookups[p] = lk
	return lk, true
}

// importOne writes what replaces the token @tok; false when expansion must
// stop.
func (l *loader) importOne(b *capped, tok, dir string, stack []string, f *File) bool {
	orig := "@" + tok
	p := strings.TrimRight(tok, ".,;:!?)")
	rest := tok[len(p):]
	if strings.Contains(p, "://") || p == "" || l.stopped {
		return b.add(orig)
	}
	if l.ctx.Err() != nil {
		return false
	}
	if strings.HasPrefix(p, "~/") {
		home, err := os.UserHomeDir()
		if err != nil {
			return b.add(orig)
		}
		p = filepath.Join(home, p[2:])
	} else if !filepath.IsAbs(p) {
		p = filepath.Join(dir, p)
	}
	from := stack[len(stack)-1]
	lk, ok := l.resolve(p, from)
	if !ok || lk.real == "" {
		return b.add(orig) // names no file: ordinary text
	}
	real := lk.real
	if !l.inside(real) && !l.inGlobal(real) {
		l.warn("%s: import of %s skipped: it is outside the workspace and not a Markdown file of the global instruction folder", from, p)
		return b.add(fmt.Sprintf("<!-- import skipped: %s is outside the workspace -->", p) + rest)
	}
	if slices.Contains(stack, real) {
		l.warn("%s: import of %s skipped: import cycle", from, p)
		return b.add(fmt.Sprintf("<!-- import cycle stopped: %s -->", p) + rest)
	}
	if l.included[real] {
		l.repeats[p]++
		return b.add(fmt.Sprintf("<!-- already imported above: %s -->", p) + rest)
	}
	if len(stack) > MaxImportDepth {
		l.warn("%s: import of %s skipped: more than %d levels of imports", from, p, MaxImportDepth)
		return b.add(fmt.Sprintf("<!-- import not followed: %s is more than %d levels deep -->", p, MaxImportDepth) + rest)
	}
	l.sources[p], l.sources[real] = true, true
	fd := l.read(real, from)
	if fd == nil {
		return b.add(orig)
	}
	if fd.err != nil {
		l.warn("%s: import of %s skipped: %v", from, p, fd.err)
		return b.add(fmt.Sprintf("<!-- import skipped: %s: %v -->", p, fd.err) + rest)
	}
	l.included[real] = true
	f.Imports = append(f.Imports, p)
	f.Truncated = f.Truncated || fd.cut
	return b.add(fmt.Sprintf("\n<!-- Imported from: %s -->\n", p)) &&
		l.expand(b, strings.TrimSpace(string(fd.data)), filepath.Dir(real), append(stack, real), f) &&
		b.add(fmt.Sprintf("\n<!-- End of import from: %s -->\n", p)+rest)
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
