package tools

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/acpd/acpd/acp"
	"github.com/acpd/acpd/session/tools/confine"
)

var writeFileSpec = mustSpec("write_file", acp.KindEdit,
	"Writes content to a specified file in the local filesystem. The user has the ability to modify `content`. "+
		"If modified, this will be stated in the response.",
	`{
  "type": "object",
  "properties": {
    "file_path": {"type": "string", "description": "The absolute path to the file to write to (e.g., '/home/user/project/file.txt'). Relative paths are not supported."},
    "content": {"type": "string", "description": "The content to write to the file."}
  },
  "required": ["file_path", "content"]
}`)

type writeFileTool struct{ toolSpec }

type writeFileArgs struct {
	FilePath string `json:"file_path"`
	Content  string `json:"content"`
}

func (t *writeFileTool) Build(env *Env, args json.RawMessage) (Call, error) {
	var a writeFileArgs
	if err := t.decode(args, &a); err != nil {
		return nil, err
	}
	tg, err := env.confineFile(NameWriteFile, a.FilePath)
	if err != nil {
		return nil, err
	}
	return &writeFileCall{t: tg, content: a.Content, title: "Write " + env.roots().Shown(tg.Path())}, nil
}

type writeFileCall struct {
	t        confine.Target
	content  string
	title    string
	prepared bool
	old      *string // current text; nil for a new file
}

func (c *writeFileCall) Title() string { return c.title }

func (c *writeFileCall) Locations() []acp.ToolCallLocation {
	return []acp.ToolCallLocation{{Path: c.t.Path()}}
}

// Prepare fetches the current text so the permission request shows the
// whole-file diff.
func (c *writeFileCall) Prepare(ctx context.Context, env *Env) error {
	old, err := readCurrent(ctx, env, c.t)
	if err != nil {
		return err
	}
	c.old, c.prepared = old, true
	return nil
}

func (c *writeFileCall) Confirmation() Confirmation {
	old := c.old
	if !c.prepared {
		// Best effort from disk: the host did not call Prepare.
		if b, err := readLocal(c.t); err == nil {
			s := string(b)
			old = &s
		}
	}
	return Confirmation{Kind: ConfirmEdit, Label: "write_file", Content: []acp.ToolCallContent{acp.DiffContent(c.t.Path(), old, c.content)},
		Paths: []string{c.t.Real()}}
}

func (c *writeFileCall) Execute(ctx context.Context, env *Env) Result {
	old, err := readCurrent(ctx, env, c.t)
	if err != nil {
		return failure(classifyRead(err), err)
	}
	if err := writeWhole(ctx, env, c.t, c.content); err != nil {
		return failure(classifyWrite(err), fmt.Errorf("writing %s: %w", c.t.Path(), err))
	}
	msg := "Successfully overwrote file: " + c.t.Path() + "."
	if old == nil {
		msg = "Successfully created and wrote to new file: " + c.t.Path() + "."
	}
	return Result{LLMContent: msg, Content: []acp.ToolCallContent{acp.DiffContent(c.t.Path(), old, c.content)}}
}

// readCurrent returns the current text of t, or nil when the file does not exist.
func readCurrent(ctx context.Context, env *Env, t confine.Target) (*string, error) {
	s, err := readWhole(ctx, env, t)
	if err != nil {
		if classify(err) == ErrTypeFileNotFound {
			return nil, nil
		}
		return nil, err
	}
	return &s, nil
}

func classifyRead(err error) string {
	if _, ok := err.(*tooLargeError); ok {
		return ErrTypeFileTooLarge
	}
	if k := classify(err); k != ErrTypeUnknown {
		return k
	}
	return ErrTypeReadContentFailure
}

func classifyWrite(err error) string {
	if k := classify(err); k != ErrTypeUnknown && k != ErrTypeFileNotFound {
		return k
	}
	return ErrTypeFileWriteFailure
}
