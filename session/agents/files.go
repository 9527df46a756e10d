package agents

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"sync"

	"github.com/acpd/acpd/session/deffiles"
)

// Agent files are workspace input, untrusted: a folder may hold anything.
// A file past maxFileSize and files past maxFiles per folder are left out
// with a warning, so a hostile or mistaken folder cannot slow a session or
// fill the model's context.
const (
	maxFileSize = 64 << 10
	maxFiles    = 100
)

// Dir is one folder of agent files.
type Dir struct {
	Path   string
	Root   string // the workspace root of a project folder (deffiles.Folder.Root)
	Source Source
}

// Dirs lists the agent folders of a session (deffiles.Folders), lowest
// precedence first: the global folder (globalDir, usually
// $XDG_CONFIG_HOME/acpd/agents), then each workspace root's .claude/agents,
// .qwen/agents and .acpd/agents — the order of the command folders.
func Dirs(roots []string, globalDir string) []Dir {
	var out []Dir
	for _, f := range deffiles.Folders(roots, globalDir, "agents") {
		d := Dir{Path: f.Path, Root: f.Root, Source: SourceProject}
		if f.Global {
			d.Source = SourceGlobal
		}
		out = append(out, d)
	}
	return out
}

// Loaded is the file agents of a session, before NewSet checks them
// against the session's tools and models.
type Loaded struct {
	Agents []fileAgent // by name
	// Warnings name file:line for every file left out.
	Warnings []string
	// Stamp identifies the files read (see Stamp).
	Stamp string
}

// fileAgent is an agent read from a file, with the lines of its settings
// for NewSet's warnings.
type fileAgent struct {
	Agent
	nameLine, modelLine int
	rawTools            []string // the names as written, for warnings
	toolLines           []int
}

// candidate is an agent file found in a folder.
type candidate = deffiles.File

// list returns the agent files of d (its *.md files, not its subfolders,
// sorted by name) and the warnings of the listing itself.
func list(d Dir) ([]candidate, []string) {
	ents, err := os.ReadDir(d.Path)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) || isNotDir(d.Path) {
			return nil, nil
		}
		return nil, []string{fmt.Sprintf("%s: cannot read: %v", d.Path, deffiles.Cause(err))}
	}
	var out []candidate
	var warns []string
	for _, e := range ents {
		if e.IsDir() || filepath.Ext(e.Name()) != ".md" {
			continue
		}
		p := filepath.Join(d.Path, e.Name())
		if len(out) >= maxFiles {
			warns = append(warns, fmt.Sprintf("%s: more than %d agent files; the rest are left out", d.Path, maxFiles))
			break
		}
		info, err := os.Stat(p) // follows a symlinked file
		if err != nil {
			warns = append(warns, fmt.Sprintf("%s:1: cannot read: %v; agent left out", p, deffiles.Cause(err)))
			continue
		}
		if !info.Mode().IsRegular() {
			warns = append(warns, fmt.Sprintf("%s:1: not a regular file; agent left out", p))
			continue
		}
		real, err := deffiles.Resolve(p, d.Root)
		if err != nil {
			warns = append(warns, fmt.Sprintf("%s:1: %v; agent left out", p, deffiles.Cause(err)))
			continue
		}
		f := deffiles.Of(p, info)
		f.Real = real
		out = append(out, f)
	}
	return out, warns
}

// isNotDir reports a path that exists but is not a folder: nothing to load.
func isNotDir(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && !fi.IsDir()
}

// Stamp identifies the agent files under dirs (deffiles.Stamp).
func Stamp(dirs []Dir) string {
	return deffiles.Stamp(dirs, func(d Dir) []candidate {
		cs, _ := list(d)
		return cs
	})
}

// Load reads the agent files of dirs. A file that cannot be read or
// parsed is left out with a warning naming file:line; the others load.
func Load(dirs []Dir) *Loaded {
	byName := map[string]fileAgent{}
	var warns []string
	var stamp strings.Builder
	for _, d := range dirs {
		cs, ws := list(d)
		warns = append(warns, ws...)
		deffiles.AppendStamps(&stamp, cs)
		inDir := map[string]string{}
		for _, c := range cs {
			a, err := loadFile(d, c)
			if err != nil {
				warns = append(warns, err.Error())
				continue
			}
			if prev, ok := inDir[a.Name]; ok {
				warns = append(warns, fmt.Sprintf("%s:%d: agent %q is also defined in %s; this file is used", a.Path, a.nameLine, a.Name, prev))
			}
			inDir[a.Name] = a.Path
			byName[a.Name] = a
		}
	}
	out := &Loaded{Warnings: warns, Stamp: stamp.String()}
	for _, a := range byName {
		out.Agents = append(out.Agents, a)
	}
	sort.Slice(out.Agents, func(i, j int) bool { return out.Agents[i].Name < out.Agents[j].Name })
	return out
}

// lineError is a problem at a line of an agent file.
func lineError(path string, line int, format string, args ...any) error {
	return fmt.Errorf("%s:%d: %s; agent left out", path, line, fmt.Sprintf(format, args...))
}

// validName is what an agent may be called: it is the subagent_type the
// model writes, so no spaces or punctuation beyond - _ . and at most 64
// characters.
var validName = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$`) })

func loadFile(d Dir, c candidate) (fileAgent, error) {
	data, err := deffiles.ReadText(c, maxFileSize)
	if err != nil {
		return fileAgent{}, lineError(c.Path, 1, "%v", err)
	}
	a, err := parse(c.Path, data)
	if err != nil {
		return fileAgent{}, err
	}
	a.Source, a.Path = d.Source, c.Path
	return a, nil
}

// parse reads an agent file: front matter between "---" lines at the top,
// then the system prompt. The front matter is the YAML subset agent files
// use: `key: value` lines (values optionally quoted), block scalars (`|`,
// `>`) and lists, both `[a, b]` and indented `- a` items. Keys other than
// name, description, tools and model (color, permissions, …) belong to
// other agents' formats and are ignored.
func parse(path string, data []byte) (fileAgent, error) {
	parts, err := deffiles.Split(data)
	if err != nil {
		return fileAgent{}, lineError(path, 1, "%v", err)
	}
	if parts.FrontEnd == 0 {
		return fileAgent{}, lineError(path, 1, "no front matter: the file must start with a --- line, then name and description")
	}
	fm, err := parseFrontMatter(path, parts.Front, 2)
	if err != nil {
		return fileAgent{}, err
	}
	var a fileAgent
	name, ok := fm["name"]
	switch {
	case !ok:
		return fileAgent{}, lineError(path, 1, "missing the required key \"name\"")
	case name.list != nil:
		return fileAgent{}, lineError(path, name.line, "\"name\" must be a string")
	case !validName().MatchString(name.text):
		return fileAgent{}, lineError(path, name.line, "%q is not a usable agent name (letters, digits, - _ . only, at most 64 characters)", name.text)
	}
	a.Name, a.nameLine = name.text, name.line
	desc, ok := fm["description"]
	switch {
	case !ok:
		return fileAgent{}, lineError(path, 1, "missing the required key \"description\"")
	case desc.list != nil:
		return fileAgent{}, lineError(path, desc.line, "\"description\" must be a string")
	case strings.TrimSpace(desc.text) == "":
		return fileAgent{}, lineError(path, desc.line, "\"description\" is empty")
	}
	a.Description = strings.TrimSpace(desc.text)
	if m, ok := fm["model"]; ok {
		if m.list != nil {
			return fileAgent{}, lineError(path, m.line, "\"model\" must be a string")
		}
		// "inherit" is Claude Code's spelling of the session's model.
		if v := strings.TrimSpace(m.text); v != "" && v != "inherit" {
			a.Model, a.modelLine = v, m.line
		}
	}
	if t, ok := fm["tools"]; ok {
		items, lines := t.list, t.itemLines
		if items == nil {
			// A comma-separated list on one line.
			for _, s := range strings.Split(t.text, ",") {
				if s = deffiles.Unquote(strings.TrimSpace(s)); s != "" {
					items = append(items, s)
					lines = append(lines, t.line)
				}
			}
		}
		a.Tools = []string{}
		for i, raw := range items {
			a.Tools = append(a.Tools, CanonicalTool(raw))
			a.rawTools = append(a.rawTools, raw)
			a.toolLines = append(a.toolLines, lines[i])
		}
	}
	a.Prompt = parts.Body
	if a.Prompt == "" {
		return fileAgent{}, lineError(path, parts.FrontEnd, "the agent's system prompt (the text after the front matter) is empty")
	}
	return a, nil
}

// value is one front matter key's value: text, or a list (list non-nil).
type value struct {
	text      string
	list      []string
	line      int
	itemLines []int
}

// parseFrontMatter reads the front matter lines; first is the file line of
// lines[0].
func parseFrontMatter(path string, lines []string, first int) (map[string]value, error) {
	out := map[string]value{}
	last := ""
	block := false // the last key's value is a block scalar or a list
	for i, l := range lines {
		n := first + i
		trimmed := strings.TrimSpace(l)
		indented := l != "" && (l[0] == ' ' || l[0] == '\t')
		switch {
		case trimmed == "" || strings.HasPrefix(trimmed, "#"):
			if block && last != "" && trimmed == "" {
				v := out[last]
				if v.list == nil && v.text != "" {
					v.text += "\n"
					out[last] = v
				}
			}
			continue
		case strings.HasPrefix(trimmed, "- ") || trimmed == "-":
			if last == "" || !block {
				return nil, lineError(path, n, "list item %q belongs to no key", trimmed)
			}
			v := out[last]
			if v.text != "" {
				return nil, lineError(path, n, "key %q mixes text and list items", last)
			}
			v.list = append(v.list, deffiles.Unquote(strings.TrimSpace(strings.TrimPrefix(trimmed, "-"))))
			v.itemLines = append(v.itemLines, n)
			out[last] = v
			continue
		case indented:
			if last == "" {
				return nil, lineError(path, n, "front matter line %q belongs to no key", trimmed)
			}
			// A continuation of the value before it (block scalar or
			// folded plain text).
			v := out[last]
			if v.list != nil {
				return nil, lineError(path, n, "key %q mixes text and list items", last)
			}
			switch {
			case v.text == "":
				v.text = trimmed
			case strings.HasSuffix(v.text, "\n"):
				v.text += trimmed
			default:
				v.text += " " + trimmed
			}
			out[last] = v
			continue
		}
		k, val, ok := strings.Cut(l, ":")
		k = strings.TrimSpace(k)
		if !ok || k == "" || strings.ContainsAny(k, " \t\"'") {
			return nil, lineError(path, n, "front matter line %q is not `key: value`", trimmed)
		}
		if _, dup := out[k]; dup {
			return nil, lineError(path, n, "key %q is given twice", k)
		}
		val = strings.TrimSpace(val)
		v := value{line: n}
		block = false
		switch {
		case val == "" || val == "|" || val == ">" || val == "|-" || val == ">-":
			block = true
		case strings.HasPrefix(val, "["):
			if !strings.HasSuffix(val, "]") {
				return nil, lineError(path, n, "list for %q opened with [ is not closed on the same line", k)
			}
			v.list = []string{}
			for s := range strings.SplitSeq(val[1:len(val)-1], ",") {
				if s = deffiles.Unquote(strings.TrimSpace(s)); s != "" {
					v.list = append(v.list, s)
					v.itemLines = append(v.itemLines, n)
				}
			}
		default:
			v.text = deffiles.Unquote(val)
		}
		out[k] = v
		last = k
	}
	for k, v := range out {
		v.text = strings.TrimSpace(v.text)
		out[k] = v
	}
	return out, nil
}

// toolAliases maps the tool names agent files written for other agents
// use (Claude Code's and qwen-code's display names, qwen-code's legacy
// names) to acpd's. The match is exact, as the reference's is.
// Built on first use: a package-level map is built by package
// initialization, on every start of acpd.
var toolAliases = sync.OnceValue(func() map[string]string {
	return map[string]string{
		"Read": "read_file", "ReadFile": "read_file",
		"Write": "write_file", "WriteFile": "write_file",
		"Edit": "edit", "MultiEdit": "edit", "replace": "edit",
		"Glob": "glob", "FindFiles": "glob",
		"Grep": "grep_search", "SearchText": "grep_search", "search_file_content": "grep_search",
		"LS": "list_directory", "ReadFolder": "list_directory", "ListFiles": "list_directory",
		"Bash": "run_shell_command", "Shell": "run_shell_command",
		"WebFetch":  "web_fetch",
		"TodoWrite": "todo_write",
		"Task":      ToolName, legacyToolName: ToolName, "Agent": ToolName,
	}
})

// CanonicalTool returns acpd's name for a tool name written in an agent
// file.
func CanonicalTool(name string) string {
	if c, ok := toolAliases()[name]; ok {
		return c
	}
	return name
}
