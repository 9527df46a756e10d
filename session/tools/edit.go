package tools

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/acpd/acpd/acp"
	"github.com/acpd/acpd/session/tools/confine"
)

var editSpec = mustSpec("edit", acp.KindEdit,
	"Replaces text within a file. By default, replaces a single occurrence; set `replace_all` to true to replace every "+
		"occurrence of `old_string`. This tool requires providing significant context around the change to ensure "+
		"precise targeting. Always use the read_file tool to examine the file's current content before attempting a "+
		"text replacement. To create a new file, use an empty `old_string`.",
	`{
  "type": "object",
  "properties": {
    "file_path": {"type": "string", "description": "The absolute path to the file to modify. Must start with '/'."},
    "old_string": {"type": "string", "description": "The exact literal text to replace, preferably unescaped. Include at least 3 lines of context before and after the target text, matching whitespace and indentation precisely. If this string is not the exact literal text or does not match exactly, this tool will fail."},
    "new_string": {"type": "string", "description": "The exact literal text to replace old_string with, preferably unescaped. Provide the EXACT text. Ensure the resulting code is correct and idiomatic."},
    "replace_all": {"type": "boolean", "description": "Replace all occurrences of old_string (default false)."}
  },
  "required": ["file_path", "old_string", "new_string"]
}`)

type editTool struct{ toolSpec }

type editArgs struct {
	FilePath   string `json:"file_path"`
	OldString  string `json:"old_string"`
	NewString  string `json:"new_string"`
	ReplaceAll bool   `json:"replace_all"`
}

func (t *editTool) Build(env *Env, args json.RawMessage) (Call, error) {
	var a editArgs
	if err := t.decode(args, &a); err != nil {
		return nil, err
	}
	tg, err := env.confineFile(NameEdit, a.FilePath)
	if err != nil {
		return nil, err
	}
	return &editCall{t: tg, a: a, title: "Edit " + env.roots().Shown(tg.Path())}, nil
}

type editCall struct {
	t        confine.Target
	a        editArgs
	title    string
	prepared bool
	old      *string
	line     int // 1-based line of the first replacement, 0 when unknown
}

func (c *editCall) Title() string { return c.title }

func (c *editCall) Locations() []acp.ToolCallLocation {
	return location(c.t.Path(), c.line)
}

func location(path string, line int) []acp.ToolCallLocation {
	loc := acp.ToolCallLocation{Path: path}
	if line > 0 {
		loc.Line = &line
	}
	return []acp.ToolCallLocation{loc}
}

// Prepare fetches the current text so the permission request shows the
// whole-file diff and Locations the line being edited.
func (c *editCall) Prepare(ctx context.Context, env *Env) error {
	old, err := readCurrent(ctx, env, c.t)
	if err != nil {
		return err
	}
	c.old, c.prepared = old, true
	if _, line, _, err := applyEdit(c.t.Path(), old, c.a); err == nil {
		c.line = line
	}
	return nil
}

func (c *editCall) Confirmation() Confirmation {
	conf := Confirmation{Kind: ConfirmEdit, Label: "edit", Paths: []string{c.t.Real()}}
	if c.prepared {
		if next, _, _, err := applyEdit(c.t.Path(), c.old, c.a); err == nil {
			conf.Content = []acp.ToolCallContent{acp.DiffContent(c.t.Path(), c.old, next)}
			return conf
		}
	}
	// Without the file, show the replacement itself.
	var old *string
	if c.a.OldString != "" {
		s := c.a.OldString
		old = &s
	}
	conf.Content = []acp.ToolCallContent{acp.DiffContent(c.t.Path(), old, c.a.NewString)}
	return conf
}

func (c *editCall) Execute(ctx context.Context, env *Env) Result {
	old, err := readCurrent(ctx, env, c.t)
	if err != nil {
		return failure(classifyRead(err), err)
	}
	next, line, errType, err := applyEdit(c.t.Path(), old, c.a)
	if err != nil {
		return failure(errType, err)
	}
	if err := writeWhole(ctx, env, c.t, next); err != nil {
		return failure(classifyWrite(err), fmt.Errorf("writing %s: %w", c.t.Path(), err))
	}
	var msg string
	switch {
	case old == nil:
		msg = "Created new file: " + c.t.Path() + " with provided content."
	default:
		n := 1
		if c.a.ReplaceAll {
			n = strings.Count(*old, c.a.OldString)
			if n == 0 {
				n = strings.Count(*old, toCRLF(c.a.OldString))
			}
		}
		msg = fmt.Sprintf("Successfully modified file: %s (%d replacements).", c.t.Path(), n)
	}
	return Result{
		LLMContent: msg,
		Content:    []acp.ToolCallContent{acp.DiffContent(c.t.Path(), old, next)},
		Locations:  location(c.t.Path(), line),
	}
}

// applyEdit computes the new text of a file whose current text is cur (nil
// when it does not exist), qwen-code's rules: an empty old_string creates a
// new file, otherwise old_string must occur exactly once unless replace_all.
func applyEdit(path string, cur *string, a editArgs) (next string, line int, errType string, err error) {
	if cur == nil {
		if a.OldString == "" {
			return a.NewString, 1, "", nil
		}
		return "", 0, ErrTypeFileNotFound, fmt.Errorf("file not found: %s; cannot apply edit (use an empty old_string to create a new file)", path)
	}
	if a.OldString == "" {
		return "", 0, ErrTypeCreateExistingFile, fmt.Errorf("failed to edit: attempted to create a file that already exists: %s", path)
	}
	if a.OldString == a.NewString {
		return "", 0, ErrTypeEditNoChange, errors.New("no changes to apply: old_string and new_string are identical")
	}
	oldS, newS := a.OldString, a.NewString
	n := strings.Count(*cur, oldS)
	if n == 0 && strings.Contains(*cur, "\r\n") && strings.Contains(oldS, "\n") {
		// The model saw LF line endings; the file has CRLF.
		oldS, newS = toCRLF(oldS), toCRLF(newS)
		n = strings.Count(*cur, oldS)
	}
	switch {
	case n == 0:
		return "", 0, ErrTypeEditNoOccurrence, fmt.Errorf("failed to edit, could not find the string to replace in %s (0 occurrences of old_string); use read_file to check the current content", path)
	case n > 1 && !a.ReplaceAll:
		return "", 0, ErrTypeEditMultipleOccurs, fmt.Errorf("failed to edit, expected 1 occurrence but found %d for old_string in %s; set replace_all to true or include more context to make old_string unique", n, path)
	}
	line = 1 + strings.Count((*cur)[:strings.Index(*cur, oldS)], "\n")
	if a.ReplaceAll {
		return strings.ReplaceAll(*cur, oldS, newS), line, "", nil
	}
	return strings.Replace(*cur, oldS, newS, 1), line, "", nil
}

func toCRLF(s string) string {
	return strings.ReplaceAll(strings.ReplaceAll(s, "\r\n", "\n"), "\n", "\r\n")
}
