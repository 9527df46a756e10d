package tools

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/acpd/acpd/acp"
)

var todoWriteSpec = mustSpec("todo_write", acp.KindThink,
	"Creates and manages a structured task list for the current coding session. It helps track progress, organize "+
		"complex tasks, and shows the user the plan. Send the complete list every time; mark exactly one task "+
		"in_progress while working on it and mark tasks completed as soon as they are done.",
	`{
  "type": "object",
  "properties": {
    "todos": {
      "type": "array",
      "description": "The updated todo list",
      "items": {
        "type": "object",
        "properties": {
          "id": {"type": "string", "minLength": 1},
          "content": {"type": "string", "minLength": 1},
          "status": {"type": "string", "enum": ["pending", "in_progress", "completed"]}
        },
        "required": ["id", "content", "status"]
      }
    }
  },
  "required": ["todos"]
}`)

type todoWriteTool struct{ toolSpec }

type todoItem struct {
	ID      string `json:"id"`
	Content string `json:"content"`
	Status  string `json:"status"`
}

func (t *todoWriteTool) Build(env *Env, args json.RawMessage) (Call, error) {
	var a struct {
		Todos []todoItem `json:"todos"`
	}
	if err := t.decode(args, &a); err != nil {
		return nil, err
	}
	seen := map[string]bool{}
	for i, td := range a.Todos {
		if seen[td.ID] {
			return nil, fmt.Errorf("invalid parameters for todo_write: params/todos/%d/id: duplicate id %q", i, td.ID)
		}
		seen[td.ID] = true
	}
	return &todoWriteCall{todos: a.Todos}, nil
}

type todoWriteCall struct{ todos []todoItem }

func (c *todoWriteCall) Title() string                     { return "Update todo list" }
func (c *todoWriteCall) Locations() []acp.ToolCallLocation { return nil }
func (c *todoWriteCall) Confirmation() Confirmation        { return Confirmation{Kind: ConfirmNone} }

// Execute turns the list into the plan the host sends as a `plan` update;
// there is nothing to show in a tool call.
func (c *todoWriteCall) Execute(ctx context.Context, env *Env) Result {
	plan := make([]acp.PlanEntry, 0, len(c.todos))
	var b strings.Builder
	b.WriteString("Todos have been modified successfully. Ensure that you continue to use the todo list to track your progress. Please proceed with the current tasks if applicable.\n\n<system-reminder>\nYour todo list has changed. Here are the latest contents:\n")
	for _, td := range c.todos {
		plan = append(plan, acp.PlanEntry{Content: td.Content, Priority: "medium", Status: td.Status})
		fmt.Fprintf(&b, "- [%s] %s (id %s)\n", td.Status, td.Content, td.ID)
	}
	if len(c.todos) == 0 {
		b.WriteString("(empty)\n")
	}
	b.WriteString("</system-reminder>")
	return Result{LLMContent: b.String(), Plan: plan}
}
