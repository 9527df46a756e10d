package tools

import (
	"context"
	"encoding/json"
	"fmt"
	"io/fs"
	"path"
	"sort"
	"strings"
	"time"

	"github.com/acpd/acpd/acp"
	"github.com/acpd/acpd/session/tools/confine"
	"github.com/bmatcuk/doublestar/v4"
)

// globRecent is how new a file must be to be listed first (qwen-code: 24 h).
const globRecent = 24 * time.Hour

var globSpec = mustSpec("glob", acp.KindSearch,
	"Fast file pattern matching tool that works with any codebase size. Supports glob patterns like \"**/*.js\" or "+
		"\"src/**/*.ts\". Returns matching file paths sorted by modification time (newest first).",
	`{
  "type": "object",
  "properties": {
    "pattern": {"type": "string", "description": "The glob pattern to match files against"},
    "path": {"type": "string", "description": "The absolute directory to search in. If not specified, the current working directory will be used."}
  },
  "required": ["pattern"]
}`)

type globTool struct{ toolSpec }

type globArgs struct {
	Pattern string `json:"pattern"`
	Path    string `json:"path"`
}

func (t *globTool) Build(env *Env, args json.RawMessage) (Call, error) {
	var a globArgs
	if err := t.decode(args, &a); err != nil {
		return nil, err
	}
	pat, err := searchPattern("glob", "pattern", a.Pattern)
	if err != nil {
		return nil, err
	}
	tg, err := env.confineDir(a.Path)
	if err != nil {
		return nil, err
	}
	return &globCall{t: tg, pattern: pat, raw: a.Pattern, title: fmt.Sprintf("Glob '%s' in %s", a.Pattern, env.roots().Shown(tg.Path()))}, nil
}

// searchPattern validates a glob pattern relative to the search directory.
func searchPattern(tool, field, p string) (string, error) {
	bad := func(why string) (string, error) {
		return "", fmt.Errorf("invalid parameters for %s: params/%s: %s", tool, field, why)
	}
	switch {
	case strings.TrimSpace(p) == "":
		return bad("must not be empty")
	case strings.ContainsRune(p, 0):
		return bad("contains a NUL byte")
	case strings.HasPrefix(p, "/"):
		return bad("must be relative to the search path; put the directory in 'path'")
	}
	for _, el := range strings.Split(p, "/") {
		if el == ".." {
			return bad("must not contain '..'")
		}
	}
	if !doublestar.ValidatePattern(p) {
		return bad(fmt.Sprintf("invalid glob pattern %q", p))
	}
	return strings.TrimPrefix(p, "./"), nil
}

type globCall struct {
	t       confine.Target
	pattern string
	raw     string
	title   string
}

func (c *globCall) Title() string { return c.title }
func (c *globCall) Locations() []acp.ToolCallLocation {
	return []acp.ToolCallLocation{{Path: c.t.Path()}}
}
func (c *globCall) Confirmation() Confirmation {
	return Confirmation{Kind: ConfirmNone, Paths: []string{c.t.Real()}}
}

func (c *globCall) Execute(ctx context.Context, env *Env) Result {
	dir, err := c.t.OpenDir()
	if err != nil {
		return dirFailure(err)
	}
	defer dir.Close()
	type hit struct {
		path string
		mod  time.Time
	}
	var hits []hit
	pat := strings.ToLower(c.pattern)
	err = walkSearch(ctx, c.t, dir, func(p string, d fs.DirEntry) error {
		if ok, _ := doublestar.Match(pat, strings.ToLower(p)); !ok {
			return nil
		}
		var mod time.Time
		if fi, err := d.Info(); err == nil {
			mod = fi.ModTime()
		}
		hits = append(hits, hit{path.Join(c.t.Path(), p), mod})
		return nil
	})
	if err != nil {
		if ctx.Err() != nil {
			return failure(ErrTypeCancelled, err)
		}
		return failure(ErrTypeGlobExecutionError, err)
	}
	if len(hits) == 0 {
		msg := fmt.Sprintf("No files found matching pattern %q within %s", c.raw, c.t.Path())
		return Result{LLMContent: msg, Content: []acp.ToolCallContent{acp.TextContent(msg)}}
	}
	now := time.Now()
	sort.Slice(hits, func(i, j int) bool {
		ri, rj := now.Sub(hits[i].mod) < globRecent, now.Sub(hits[j].mod) < globRecent
		switch {
		case ri && rj:
			return hits[i].mod.After(hits[j].mod)
		case ri != rj:
			return ri
		}
		return hits[i].path < hits[j].path
	})
	var b strings.Builder
	fmt.Fprintf(&b, "Found %d file(s) matching %q within %s, sorted by modification time (newest first):\n", len(hits), c.raw, c.t.Path())
	for _, h := range hits {
		b.WriteString(h.path)
		b.WriteByte('\n')
	}
	out := truncateHead(b.String(), maxOutput(env))
	return Result{LLMContent: out, Content: []acp.ToolCallContent{acp.TextContent(fmt.Sprintf("Found %d matching file(s)", len(hits)))}}
}
