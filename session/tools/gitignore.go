package tools

import (
	"bytes"
	"io"
	"os"
	"path"
	"strings"
	"syscall"

	"github.com/acpd/acpd/session/tools/confine"
	"github.com/bmatcuk/doublestar/v4"
)

// maxIgnoreFile caps how much of one ignore file is read; a bigger one is
// not a hand-written ignore list and is skipped rather than slurped.
const maxIgnoreFile = 1 << 20

// ignoreRule is one pattern line of a .gitignore file.
type ignoreRule struct {
	pattern  string // doublestar pattern, relative to the file's directory
	negate   bool   // "!": re-include what an earlier rule excluded
	dirOnly  bool   // trailing "/": matches directories only
	basename bool   // no "/" inside: matches the last element at any depth
}

// ignoreFile holds the rules of one ignore file. parent is the file with
// the next lower precedence, so a chain is everything in force in a directory.
type ignoreFile struct {
	base   string // directory the patterns are relative to, from the workspace root; "" for the root
	rules  []ignoreRule
	parent *ignoreFile
}

// parseIgnore parses the contents of a .gitignore file with git's rules
// (gitignore(5)); lines that cannot match anything are dropped.
func parseIgnore(data []byte) []ignoreRule {
	data = bytes.TrimPrefix(data, []byte("\xef\xbb\xbf")) // git skips a UTF-8 BOM
	var rules []ignoreRule
	for len(data) > 0 {
		line := data
		if i := bytes.IndexByte(data, '\n'); i >= 0 {
			line, data = data[:i], data[i+1:]
		} else {
			data = nil
		}
		if r, ok := parseIgnoreLine(string(bytes.TrimSuffix(line, []byte("\r")))); ok {
			rules = append(rules, r)
		}
	}
	return rules
}

func parseIgnoreLine(line string) (ignoreRule, bool) {
	if line == "" || line[0] == '#' {
		return ignoreRule{}, false
	}
	line = trimIgnoreSpaces(line)
	var r ignoreRule
	if line != "" && line[0] == '!' {
		r.negate = true
		line = line[1:]
	}
	if strings.HasSuffix(line, "/") {
		r.dirOnly = true
		line = strings.TrimRight(line, "/")
	}
	if line == "" {
		return ignoreRule{}, false
	}
	// A slash at the start or in the middle anchors the pattern to the
	// file's directory; otherwise it matches a name at any depth.
	if strings.HasPrefix(line, "/") {
		line = line[1:]
	} else if !strings.Contains(line, "/") {
		r.basename = true
	}
	if line == "" {
		return ignoreRule{}, false
	}
	// git's "abc/**" matches everything inside abc but not abc itself, so
	// "!abc/keep" can still re-include; doublestar's "abc/**" also matches abc.
	if strings.HasSuffix(line, "/**") {
		line += "/*"
	}
	r.pattern = escapeBraces(line)
	if !doublestar.ValidatePattern(r.pattern) {
		return ignoreRule{}, false // git never matches a malformed pattern either
	}
	return r, true
}

// trimIgnoreSpaces drops trailing spaces unless the last is escaped with a
// backslash, as git does.
func trimIgnoreSpaces(s string) string {
	for strings.HasSuffix(s, " ") {
		body := s[:len(s)-1]
		// Count the backslashes before the space: an odd number escapes it.
		n := len(body) - len(strings.TrimRight(body, `\`))
		if n%2 == 1 {
			return s
		}
		s = body
	}
	return s
}

// escapeBraces makes '{' and '}' literal: gitignore has no alternation, but
// doublestar would read "{a,b}" as one.
func escapeBraces(p string) string {
	if !strings.ContainsAny(p, "{}") {
		return p
	}
	var b strings.Builder
	for i := 0; i < len(p); i++ {
		switch c := p[i]; c {
		case '\\':
			b.WriteByte(c)
			if i+1 < len(p) {
				i++
				b.WriteByte(p[i])
			}
		case '{', '}':
			b.WriteByte('\\')
			b.WriteByte(c)
		default:
			b.WriteByte(c)
		}
	}
	return b.String()
}

// ignored reports whether rel (a path from the workspace root, below every
// file's base in the chain) is ignored by the chain starting at f: the
// nearest file's last matching rule decides.
func (f *ignoreFile) ignored(rel string, isDir bool) bool {
	for ; f != nil; f = f.parent {
		sub := rel
		if f.base != "" {
			sub = rel[len(f.base)+1:]
		}
		name := sub[strings.LastIndexByte(sub, '/')+1:]
		for i := len(f.rules) - 1; i >= 0; i-- {
			r := &f.rules[i]
			if r.dirOnly && !isDir {
				continue
			}
			subject := sub
			if r.basename {
				subject = name
			}
			if ok, _ := doublestar.Match(r.pattern, subject); ok {
				return !r.negate
			}
		}
	}
	return false
}

// gitIgnorer tracks the ignore rules in force while walking one directory
// below a workspace root. The walked directory itself is never ignored: the
// model asked for it by name.
type gitIgnorer struct {
	dir    *os.Root               // the walked directory
	prefix string                 // dir relative to the workspace root; "" for the root
	base   *ignoreFile            // rules from above dir: .git/info/exclude and ancestor .gitignore files
	byDir  map[string]*ignoreFile // walk-relative directory -> chain in force inside it
}

// newGitIgnorer loads .git/info/exclude at t's workspace root and the
// .gitignore files of the directories between that root and t. Every read
// goes through an *os.Root of the workspace root, so nothing outside it is
// read; unreadable files are skipped, as git does.
func newGitIgnorer(t confine.Target, dir *os.Root) *gitIgnorer {
	g := &gitIgnorer{dir: dir, byDir: map[string]*ignoreFile{}}
	if t.Rel() != "." {
		g.prefix = t.Rel()
	}
	root, err := t.OpenRoot()
	if err != nil {
		return g
	}
	defer root.Close()
	g.base = chainFile(g.base, "", readIgnoreFile(root, ".git/info/exclude"))
	if g.prefix == "" {
		return g
	}
	g.base = chainFile(g.base, "", readIgnoreFile(root, ".gitignore"))
	elems := strings.Split(g.prefix, "/")
	for i := 1; i < len(elems); i++ {
		d := strings.Join(elems[:i], "/")
		g.base = chainFile(g.base, d, readIgnoreFile(root, d+"/.gitignore"))
	}
	return g
}

// chainFile puts the rules of a file in base on top of parent.
func chainFile(parent *ignoreFile, base string, rules []ignoreRule) *ignoreFile {
	if len(rules) == 0 {
		return parent
	}
	return &ignoreFile{base: base, rules: rules, parent: parent}
}

// enterDir loads the .gitignore of walk-relative directory p; call it for
// every directory the walk descends into, parents first.
func (g *gitIgnorer) enterDir(p string) {
	parent := g.base
	if p != "." {
		parent = g.byDir[path.Dir(p)]
	}
	g.byDir[p] = chainFile(parent, g.rootRel(p), readIgnoreFile(g.dir, path.Join(p, ".gitignore")))
}

// ignored reports whether walk-relative p (not ".") is ignored; its
// directory must have been entered.
func (g *gitIgnorer) ignored(p string, isDir bool) bool {
	chain := g.byDir[path.Dir(p)]
	if chain == nil {
		return false
	}
	return chain.ignored(g.rootRel(p), isDir)
}

func (g *gitIgnorer) rootRel(p string) string {
	switch {
	case p == ".":
		return g.prefix
	case g.prefix == "":
		return p
	}
	return g.prefix + "/" + p
}

// readIgnoreFile parses name below r if it is a regular file (git does not
// follow a symlinked .gitignore either). It opens non-blocking so a FIFO
// swapped in after the Lstat cannot hang the walk.
func readIgnoreFile(r *os.Root, name string) []ignoreRule {
	fi, err := r.Lstat(name)
	if err != nil || !fi.Mode().IsRegular() || fi.Size() > maxIgnoreFile {
		return nil
	}
	f, err := r.OpenFile(name, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil
	}
	defer f.Close()
	if fi, err := f.Stat(); err != nil || !fi.Mode().IsRegular() {
		return nil
	}
	data, err := io.ReadAll(io.LimitReader(f, maxIgnoreFile))
	if err != nil {
		return nil
	}
	return parseIgnore(data)
}
