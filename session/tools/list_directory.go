package tools

import (
	"context"
	"encoding/json"
	"fmt"
	"io/fs"
	"sort"
	"strings"

	"github.com/acpd/acpd/acp"
	"github.com/acpd/acpd/session/tools/confine"
	"github.com/bmatcuk/doublestar/v4"
)

var listDirectorySpec = mustSpec("list_directory", acp.KindSearch,
	"Lists the names of files and subdirectories directly within a specified directory path. "+
		"Can optionally ignore entries matching provided glob patterns.",
	`{
  "type": "object",
  "properties": {
    "path": {"type": "string", "description": "The absolute path to the directory to list (must be absolute, not relative)"},
    "ignore": {"type": "array", "items": {"type": "string"}, "description": "List of glob patterns to ignore"}
  },
  "required": ["path"]
}`)

type listDirectoryTool struct{ toolSpec }

type listDirectoryArgs struct {
	Path   string   `json:"path"`
	Ignore []string `json:"ignore"`
}

func (t *listDirectoryTool) Build(env *Env, args json.RawMessage) (Call, error) {
	var a listDirectoryArgs
	if err := t.decode(args, &a); err != nil {
		return nil, err
	}
	for i, p := range a.Ignore {
		if !doublestar.ValidatePattern(p) {
			return nil, fmt.Errorf("invalid parameters for list_directory: params/ignore/%d: invalid glob pattern %q", i, p)
		}
	}
	tg, err := env.confine("path", a.Path)
	if err != nil {
		return nil, err
	}
	return &listDirectoryCall{t: tg, ignore: a.Ignore, title: "List " + env.roots().Shown(tg.Path())}, nil
}

type listDirectoryCall struct {
	t      confine.Target
	ignore []string
	title  string
}

func (c *listDirectoryCall) Title() string { return c.title }
func (c *listDirectoryCall) Locations() []acp.ToolCallLocation {
	return []acp.ToolCallLocation{{Path: c.t.Path()}}
}
func (c *listDirectoryCall) Confirmation() Confirmation {
	return Confirmation{Kind: ConfirmNone, Paths: []string{c.t.Real()}}
}

func (c *listDirectoryCall) Execute(ctx context.Context, env *Env) Result {
	dir, err := c.t.OpenDir()
	if err != nil {
		return dirFailure(err)
	}
	defer dir.Close()
	entries, err := fs.ReadDir(dir.FS(), ".")
	if err != nil {
		return failure(ErrTypeLsExecutionError, fmt.Errorf("listing %s: %w", c.t.Path(), err))
	}
	type entry struct {
		name string
		dir  bool
	}
	var list []entry
	ignored, gitIgnored := 0, 0
	ign := newGitIgnorer(c.t, dir)
	ign.enterDir(".")
	for _, e := range entries {
		if matchesAny(c.ignore, e.Name()) {
			ignored++
			continue
		}
		// A symlink is not a directory to git, whatever it points at.
		if ign.ignored(e.Name(), e.IsDir()) {
			gitIgnored++
			continue
		}
		isDir := e.IsDir()
		if e.Type()&fs.ModeSymlink != 0 {
			// Report what the link is, as long as it stays in the directory's root.
			if fi, err := fs.Stat(dir.FS(), e.Name()); err == nil {
				isDir = fi.IsDir()
			}
		}
		list = append(list, entry{e.Name(), isDir})
	}
	sort.Slice(list, func(i, j int) bool {
		if list[i].dir != list[j].dir {
			return list[i].dir
		}
		return list[i].name < list[j].name
	})
	if len(list) == 0 {
		msg := fmt.Sprintf("Directory %s is empty.", c.t.Path())
		if gitIgnored > 0 {
			msg += "\n\n" + gitIgnoredNote(gitIgnored)
		}
		return Result{LLMContent: msg, Content: []acp.ToolCallContent{acp.TextContent(msg)}}
	}
	var b strings.Builder
	fmt.Fprintf(&b, "Directory listing for %s:\n", c.t.Path())
	for _, e := range list {
		if e.dir {
			b.WriteString("[DIR] ")
		}
		b.WriteString(e.name)
		b.WriteByte('\n')
	}
	if ignored > 0 {
		fmt.Fprintf(&b, "\n(%d ignored)", ignored)
	}
	if gitIgnored > 0 {
		b.WriteString("\n" + gitIgnoredNote(gitIgnored))
	}
	out := truncateHead(b.String(), maxOutput(env))
	return Result{LLMContent: out, Content: []acp.ToolCallContent{acp.TextContent(out)}}
}

func matchesAny(patterns []string, name string) bool {
	for _, p := range patterns {
		if ok, _ := doublestar.Match(p, name); ok {
			return true
		}
	}
	return false
}

// gitIgnoredNote tells the model that entries exist but were left out, so
// it does not conclude they are missing.
func gitIgnoredNote(n int) string {
	if n == 1 {
		return "(1 git-ignored entry hidden)"
	}
	return fmt.Sprintf("(%d git-ignored entries hidden)", n)
}
