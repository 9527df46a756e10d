package commands

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"

	"github.com/BurntSushi/toml"

	"github.com/acpd/acpd/session/deffiles"
)

// Limits that keep a hostile or mistaken command folder from slowing a
// session: files past maxFileSize and entries past maxFiles per folder are
// left out with a warning.
const (
	maxFileSize = 256 << 10
	maxFiles    = 1000
)

// format is what a command folder may hold.
type format int

const (
	formatTOMLAndMarkdown format = iota // .acpd/commands, .qwen/commands, the global folder
	formatMarkdown                      // .claude/commands
)

// Dir is one folder of command files.
type Dir struct {
	Path   string
	Root   string // the workspace root of a project folder (deffiles.Folder.Root)
	Source Source
	format format
}

// Dirs lists the command folders of a session (deffiles.Folders), lowest
// precedence first: the global folder (globalDir, usually
// $XDG_CONFIG_HOME/acpd/commands), then each workspace root's
// .claude/commands (Markdown only), .qwen/commands and .acpd/commands.
func Dirs(roots []string, globalDir string) []Dir {
	var out []Dir
	for _, f := range deffiles.Folders(roots, globalDir, "commands") {
		d := Dir{Path: f.Path, Root: f.Root, Source: SourceProject}
		if f.Global {
			d.Source = SourceGlobal
		}
		if f.Claude {
			d.format = formatMarkdown
		}
		out = append(out, d)
	}
	return out
}

// Loaded is the file commands of a session.
type Loaded struct {
	Commands []*Command // by name
	// Warnings name file:line for every file left out.
	Warnings []string
	// Stamp identifies the files read (see Stamp).
	Stamp string
}

// candidate is a command file found by a walk.
type candidate struct {
	deffiles.File
	rel string
}

// walk lists the command files of d (sorted by path) and the warnings of
// the walk itself.
func walk(d Dir) ([]candidate, []string) {
	var out []candidate
	var warns []string
	err := filepath.WalkDir(d.Path, func(p string, e fs.DirEntry, err error) error {
		if err != nil {
			if p == d.Path && errors.Is(err, fs.ErrNotExist) {
				return fs.SkipAll
			}
			warns = append(warns, fmt.Sprintf("%s: cannot read: %v", p, deffiles.Cause(err)))
			if e != nil && e.IsDir() {
				return fs.SkipDir
			}
			return nil
		}
		if e.IsDir() {
			return nil
		}
		ext := filepath.Ext(p)
		if ext != ".md" && (ext != ".toml" || d.format == formatMarkdown) {
			return nil
		}
		if len(out) >= maxFiles {
			warns = append(warns, fmt.Sprintf("%s: more than %d command files; the rest are left out", d.Path, maxFiles))
			return fs.SkipAll
		}
		info, err := os.Stat(p) // follows a symlinked file
		if err != nil {
			warns = append(warns, fmt.Sprintf("%s: cannot read: %v", p, deffiles.Cause(err)))
			return nil
		}
		if !info.Mode().IsRegular() {
			warns = append(warns, fmt.Sprintf("%s: not a regular file; left out", p))
			return nil
		}
		real, err := deffiles.Resolve(p, d.Root)
		if err != nil {
			warns = append(warns, fmt.Sprintf("%s: %v; left out", p, deffiles.Cause(err)))
			return nil
		}
		rel, _ := filepath.Rel(d.Path, p)
		f := deffiles.Of(p, info)
		f.Real = real
		out = append(out, candidate{File: f, rel: rel})
		return nil
	})
	if err != nil {
		warns = append(warns, fmt.Sprintf("%s: %v", d.Path, err))
	}
	return out, warns
}

// Stamp identifies the command files under dirs (deffiles.Stamp).
func Stamp(dirs []Dir) string {
	return deffiles.Stamp(dirs, func(d Dir) []candidate {
		cs, _ := walk(d)
		return cs
	})
}

// Load reads the command files of dirs. A file that cannot be read or
// parsed is left out with a warning naming file:line; the others load.
func Load(dirs []Dir) *Loaded {
	byName := map[string]*Command{}
	var warns []string
	var stamp strings.Builder
	for _, d := range dirs {
		cs, ws := walk(d)
		warns = append(warns, ws...)
		deffiles.AppendStamps(&stamp, cs)
		for _, c := range cs {
			cmd, err := loadFile(d, c)
			if err != nil {
				warns = append(warns, err.Error())
				continue
			}
			byName[cmd.Name] = cmd
		}
	}
	out := &Loaded{Warnings: warns, Stamp: stamp.String()}
	for _, c := range byName {
		out.Commands = append(out.Commands, c)
	}
	sort.Slice(out.Commands, func(i, j int) bool { return out.Commands[i].Name < out.Commands[j].Name })
	return out
}

// lineError is a problem at a line of a command file.
func lineError(path string, line int, format string, args ...any) error {
	return fmt.Errorf("%s:%d: %s; command left out", path, line, fmt.Sprintf(format, args...))
}

// commandName turns a path relative to the command folder into the
// command's name: folders joined by ':', a ':' inside a segment made '_'.
func commandName(rel string) string {
	rel = strings.TrimSuffix(rel, filepath.Ext(rel))
	segs := strings.Split(filepath.ToSlash(rel), "/")
	for i, s := range segs {
		segs[i] = strings.ReplaceAll(s, ":", "_")
	}
	return strings.Join(segs, ":")
}

func loadFile(d Dir, c candidate) (*Command, error) {
	name := commandName(c.rel)
	if name == "" || strings.ContainsFunc(name, isSpaceRune) || slices.Contains(strings.Split(name, ":"), "") {
		return nil, lineError(c.Path, 1, "%q is not a usable command name (no spaces or empty parts)", name)
	}
	data, err := deffiles.ReadText(c.File, maxFileSize)
	if err != nil {
		return nil, lineError(c.Path, 1, "%v", err)
	}
	cmd := &Command{Name: name, Source: d.Source, Path: c.Path}
	if filepath.Ext(c.Path) == ".toml" {
		err = parseTOML(cmd, data)
	} else {
		err = parseMarkdown(cmd, data)
	}
	if err != nil {
		return nil, err
	}
	if strings.TrimSpace(cmd.Template) == "" {
		return nil, lineError(c.Path, 1, "the command's prompt is empty")
	}
	if cmd.Description == "" {
		cmd.Description = "Custom command from " + filepath.Base(c.Path)
	}
	return cmd, nil
}

func isSpaceRune(r rune) bool { return r == ' ' || r == '\t' || r == '\n' || r == '\r' }

// parseTOML reads a qwen-code style command: a required `prompt` string and
// an optional `description` (and acpd's optional `argument-hint`).
func parseTOML(cmd *Command, data []byte) error {
	var v map[string]any
	if _, err := toml.Decode(string(data), &v); err != nil {
		var pe toml.ParseError
		if errors.As(err, &pe) {
			return lineError(cmd.Path, max(pe.Position.Line, 1), "invalid TOML: %s", pe.Message)
		}
		return lineError(cmd.Path, 1, "invalid TOML: %v", err)
	}
	str := func(key string, required bool) (string, error) {
		raw, ok := v[key]
		if !ok {
			if required {
				return "", lineError(cmd.Path, 1, "missing the required string key %q", key)
			}
			return "", nil
		}
		s, ok := raw.(string)
		if !ok {
			return "", lineError(cmd.Path, keyLine(data, key), "%q must be a string", key)
		}
		return s, nil
	}
	var err error
	if cmd.Template, err = str("prompt", true); err != nil {
		return err
	}
	if cmd.Description, err = str("description", false); err != nil {
		return err
	}
	if cmd.Hint, err = str("argument-hint", false); err != nil {
		return err
	}
	return nil
}

// keyLine finds the line where key is assigned, for a warning; 1 when not
// found.
func keyLine(data []byte, key string) int {
	for i, l := range strings.Split(string(data), "\n") {
		l = strings.TrimSpace(l)
		if strings.HasPrefix(l, key) && strings.HasPrefix(strings.TrimSpace(l[len(key):]), "=") {
			return i + 1
		}
	}
	return 1
}

// parseMarkdown reads a Markdown command: an optional front matter block
// (between "---" lines at the very top) of `key: value` lines, of which
// description and argument-hint are used; the rest of the file is the
// prompt. Decision: the front matter is read leniently as key/value lines,
// not as YAML, because the commands teams keep write hints such as
// `argument-hint: [message]`, which a YAML parser takes for a list.
func parseMarkdown(cmd *Command, data []byte) error {
	parts, err := deffiles.Split(data)
	if err != nil {
		return lineError(cmd.Path, 1, "%v", err)
	}
	cmd.Template = parts.Body
	fields := map[string]string{}
	last := ""
	for i, l := range parts.Front {
		n := i + 2 // the file line of l
		trimmed := strings.TrimSpace(l)
		switch {
		case trimmed == "" || strings.HasPrefix(trimmed, "#"):
			continue
		case l[0] == ' ' || l[0] == '\t' || strings.HasPrefix(trimmed, "- "):
			// A continuation (folded text, list item) of the key before it.
			if last == "" {
				return lineError(cmd.Path, n, "front matter line %q belongs to no key", trimmed)
			}
			fields[last] = strings.TrimSpace(fields[last] + " " + deffiles.Unquote(trimmed))
			continue
		}
		k, val, ok := strings.Cut(l, ":")
		k = strings.TrimSpace(k)
		if !ok || k == "" || strings.ContainsAny(k, " \t\"'") {
			return lineError(cmd.Path, n, "front matter line %q is not `key: value`", trimmed)
		}
		val = strings.TrimSpace(val)
		if val == "|" || val == ">" || val == "|-" || val == ">-" {
			val = ""
		}
		fields[k] = deffiles.Unquote(val)
		last = k
	}
	cmd.Description = fields["description"]
	cmd.Hint = fields["argument-hint"]
	return nil
}
