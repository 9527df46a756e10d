package tools

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"regexp"
	"runtime"
	"strings"
	"sync"

	"github.com/acpd/acpd/acp"
	"github.com/acpd/acpd/session/tools/confine"
	"github.com/bmatcuk/doublestar/v4"
)

const (
	grepMaxMatches  = 1000
	grepMaxLineLen  = 500
	grepMaxFileSize = 10 << 20
)

var grepSearchSpec = mustSpec("grep_search", acp.KindSearch,
	"Searches for a regular expression pattern within the content of files in a specified directory (or the current "+
		"working directory). Can filter files by a glob pattern. Returns the lines containing matches, along with their "+
		"file paths and line numbers.",
	`{
  "type": "object",
  "properties": {
    "pattern": {"type": "string", "description": "The regular expression (regex) pattern to search for within file contents (e.g., 'function\\s+myFunction', 'import\\s+\\{.*\\}\\s+from\\s+.*')."},
    "path": {"type": "string", "description": "Optional: The absolute path to the directory to search within. If omitted, searches the current working directory."},
    "glob": {"type": "string", "description": "Optional: A glob pattern to filter which files are searched (e.g., '*.js', '*.{ts,tsx}', 'src/**'). If omitted, searches all files (respecting potential global ignores)."}
  },
  "required": ["pattern"]
}`)

type grepSearchTool struct{ toolSpec }

type grepSearchArgs struct {
	Pattern string `json:"pattern"`
	Path    string `json:"path"`
	Glob    string `json:"glob"`
}

func (t *grepSearchTool) Build(env *Env, args json.RawMessage) (Call, error) {
	var a grepSearchArgs
	if err := t.decode(args, &a); err != nil {
		return nil, err
	}
	if a.Pattern == "" {
		return nil, fmt.Errorf("invalid parameters for grep_search: params/pattern: must not be empty")
	}
	re, err := regexp.Compile("(?i)" + a.Pattern)
	if err != nil {
		return nil, fmt.Errorf("invalid parameters for grep_search: params/pattern: invalid regular expression: %v", err)
	}
	var glob string
	if a.Glob != "" {
		if glob, err = searchPattern("grep_search", "glob", a.Glob); err != nil {
			return nil, err
		}
	}
	tg, err := env.confineDir(a.Path)
	if err != nil {
		return nil, err
	}
	title := fmt.Sprintf("grep '%s' in %s", a.Pattern, env.roots().Shown(tg.Path()))
	if glob != "" {
		title += fmt.Sprintf(" (%s)", glob)
	}
	return &grepSearchCall{t: tg, re: re, raw: a.Pattern, glob: glob, title: title}, nil
}

type grepSearchCall struct {
	t     confine.Target
	re    *regexp.Regexp
	raw   string
	glob  string
	title string
}

func (c *grepSearchCall) Title() string { return c.title }
func (c *grepSearchCall) Locations() []acp.ToolCallLocation {
	return []acp.ToolCallLocation{{Path: c.t.Path()}}
}
func (c *grepSearchCall) Confirmation() Confirmation {
	return Confirmation{Kind: ConfirmNone, Paths: []string{c.t.Real()}}
}

type grepMatch struct {
	line int
	text string
}

type grepFile struct {
	rel     string
	matches []grepMatch
}

func (c *grepSearchCall) Execute(ctx context.Context, env *Env) Result {
	dir, err := c.t.OpenDir()
	if err != nil {
		return dirFailure(err)
	}
	defer dir.Close()
	files, err := c.collect(ctx, dir)
	if err != nil {
		if ctx.Err() != nil {
			return failure(ErrTypeCancelled, err)
		}
		return failure(ErrTypeGrepExecutionError, err)
	}
	found := c.search(ctx, dir, files)
	if ctx.Err() != nil {
		return failure(ErrTypeCancelled, ctx.Err())
	}
	where := fmt.Sprintf("in path %q", c.t.Path())
	filter := ""
	if c.glob != "" {
		filter = fmt.Sprintf(" (filter: %q)", c.glob)
	}
	total := 0
	for _, f := range found {
		total += len(f.matches)
	}
	if total == 0 {
		msg := fmt.Sprintf("No matches found for pattern %q %s%s.", c.raw, where, filter)
		return Result{LLMContent: msg, Content: []acp.ToolCallContent{acp.TextContent(msg)}}
	}
	var b strings.Builder
	term := "matches"
	if total == 1 {
		term = "match"
	}
	fmt.Fprintf(&b, "Found %d %s for pattern %q %s%s", total, term, c.raw, where, filter)
	if total >= grepMaxMatches {
		fmt.Fprintf(&b, " (results limited to %d matches; narrow the pattern, path or glob)", grepMaxMatches)
	}
	b.WriteString(":\n---\n")
	for _, f := range found {
		if len(f.matches) == 0 {
			continue
		}
		fmt.Fprintf(&b, "File: %s\n", f.rel)
		for _, m := range f.matches {
			fmt.Fprintf(&b, "L%d: %s\n", m.line, m.text)
		}
		b.WriteString("---\n")
	}
	out := truncateHead(b.String(), maxOutput(env))
	return Result{LLMContent: out, Content: []acp.ToolCallContent{acp.TextContent(fmt.Sprintf("Found %d %s", total, term))}}
}

// collect lists the regular files to search, in walk (lexical) order.
func (c *grepSearchCall) collect(ctx context.Context, dir *os.Root) ([]string, error) {
	var files []string
	err := walkSearch(ctx, c.t, dir, func(p string, d fs.DirEntry) error {
		if !d.Type().IsRegular() {
			return nil // symlinks and devices are not followed
		}
		if c.glob != "" && !globMatches(c.glob, p) {
			return nil
		}
		files = append(files, p)
		return nil
	})
	return files, err
}

// globMatches applies a grep glob as ripgrep does: a pattern without '/'
// matches the base name anywhere, one with '/' the path from the search root.
func globMatches(glob, rel string) bool {
	if !strings.Contains(glob, "/") {
		ok, _ := doublestar.Match(glob, path.Base(rel))
		return ok
	}
	ok, _ := doublestar.Match(glob, rel)
	return ok
}

// search greps files with a few workers and returns them in input order,
// stopping once grepMaxMatches lines were found.
func (c *grepSearchCall) search(ctx context.Context, dir *os.Root, files []string) []grepFile {
	results := make([]grepFile, len(files))
	workers := min(runtime.GOMAXPROCS(0), 4)
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		next int
		hits int
	)
	for range workers {
		wg.Go(func() {
			buf := make([]byte, 0, 64<<10)
			for {
				mu.Lock()
				i := next
				next++
				full := hits >= grepMaxMatches
				mu.Unlock()
				if i >= len(files) || full || ctx.Err() != nil {
					return
				}
				var ms []grepMatch
				ms, buf = c.grepFile(dir, files[i], buf)
				if len(ms) > 0 {
					results[i] = grepFile{rel: files[i], matches: ms}
					mu.Lock()
					hits += len(ms)
					mu.Unlock()
				}
			}
		})
	}
	wg.Wait()
	// Keep the first grepMaxMatches in path order.
	out := results[:0]
	n := 0
	for _, f := range results {
		if len(f.matches) == 0 || n >= grepMaxMatches {
			continue
		}
		if n+len(f.matches) > grepMaxMatches {
			f.matches = f.matches[:grepMaxMatches-n]
		}
		n += len(f.matches)
		out = append(out, f)
	}
	return out
}

// grepFile returns the matching lines of one file; binary and huge files
// are skipped. buf is reused between files.
func (c *grepSearchCall) grepFile(dir *os.Root, rel string, buf []byte) ([]grepMatch, []byte) {
	f, err := dir.Open(rel)
	if err != nil {
		return nil, buf
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil || !fi.Mode().IsRegular() || fi.Size() > grepMaxFileSize {
		return nil, buf
	}
	size := int(fi.Size())
	if cap(buf) < size {
		buf = make([]byte, size)
	}
	buf = buf[:size]
	n, err := io.ReadFull(f, buf)
	buf = buf[:n] // the file may have shrunk since Stat
	if err != nil && err != io.ErrUnexpectedEOF && err != io.EOF {
		return nil, buf
	}
	data := buf
	if looksBinary(data) || !c.re.Match(data) {
		return nil, buf
	}
	var ms []grepMatch
	line := 0
	for len(data) > 0 {
		line++
		l := data
		if j := bytes.IndexByte(data, '\n'); j >= 0 {
			l, data = data[:j], data[j+1:]
		} else {
			data = nil
		}
		if !c.re.Match(l) {
			continue
		}
		text := strings.TrimSpace(string(bytes.TrimRight(l, "\r")))
		if len(text) > grepMaxLineLen {
			text = truncateRunes(text, grepMaxLineLen) + "…"
		}
		ms = append(ms, grepMatch{line: line, text: text})
		if len(ms) >= grepMaxMatches {
			break
		}
	}
	return ms, buf
}
