package agents

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync/atomic"

	"github.com/acpd/acpd/acp"
	"github.com/acpd/acpd/session/model"
	"github.com/acpd/acpd/session/tools"
)

// ToolName is the tool that starts a subagent (qwen-code's `agent`).
const ToolName = "agent"

// legacyToolName is the reference's former name of the tool. It is never
// offered; agent files that list it mean the agent tool.
const legacyToolName = "task"

var schema = tools.NewSchema(ToolName, `{
  "type": "object",
  "properties": {
    "description": {
      "type": "string",
      "minLength": 1,
      "pattern": "\\S",
      "description": "A short (3-7 words) title for the task, shown to the user."
    },
    "prompt": {
      "type": "string",
      "minLength": 1,
      "pattern": "\\S",
      "description": "The whole task, with every detail the subagent needs and what its answer should contain."
    },
    "subagent_type": {
      "type": "string",
      "description": "The agent to run the task (listed above); default general-purpose."
    }
  },
  "required": ["description", "prompt"]
}`)

const toolIntro = `Hand a self-contained task to a subagent. It starts with a fresh context holding only your prompt, works with its own tools, and returns one final answer as this call's result; its tool calls never enter this conversation. Use it for broad searches or explorations whose details you will not need again, and for independent pieces of work; several agent calls in one response run in parallel. Not for a file you know or a search of one or two calls. The subagent cannot see this conversation or ask you anything: put every detail it needs in prompt and say what it should report. Its answer is not shown to the user: tell the user what you learned.

Available agents (subagent_type):`

// toolDescription lists the agents under the tool's introduction.
func toolDescription(as []*Agent) string {
	var b strings.Builder
	b.WriteString(toolIntro)
	for _, a := range as {
		d := strings.Join(strings.Fields(a.Description), " ")
		if r := []rune(d); len(r) > maxListedDescription {
			d = string(r[:maxListedDescription-1]) + "…"
		}
		b.WriteString("\n- " + a.Name + ": " + d)
		if a.Tools != nil {
			if len(a.Tools) == 0 {
				b.WriteString(" (Tools: none)")
			} else {
				b.WriteString(" (Tools: " + strings.Join(a.Tools, ", ") + ")")
			}
		}
	}
	return b.String()
}

// ToolDescription is the agent tool's description for this set.
func (s *Set) ToolDescription() string { return s.desc }

// Tool is a session's agent tool. Its description lists the session's
// agents, which change when their files do: SetAgents swaps the set.
type Tool struct {
	set atomic.Pointer[Set]
}

// NewTool returns the agent tool offering set.
func NewTool(set *Set) *Tool {
	t := &Tool{}
	t.set.Store(set)
	return t
}

// SetAgents replaces the agents the tool offers.
func (t *Tool) SetAgents(s *Set) { t.set.Store(s) }

// Agents is the set the tool offers.
func (t *Tool) Agents() *Set { return t.set.Load() }

func (t *Tool) Name() string       { return ToolName }
func (t *Tool) Kind() acp.ToolKind { return acp.KindOther }

func (t *Tool) Spec() model.ToolSpec {
	return model.ToolSpec{Name: ToolName, Description: t.Agents().ToolDescription(), Parameters: schema.Params()}
}

// Build validates the arguments and resolves the agent.
func (t *Tool) Build(_ *tools.Env, args json.RawMessage) (tools.Call, error) {
	var a struct {
		Description string `json:"description"`
		Prompt      string `json:"prompt"`
		Type        string `json:"subagent_type"`
	}
	if err := schema.Decode(args, &a); err != nil {
		return nil, err
	}
	if strings.TrimSpace(a.Type) == "" {
		a.Type = GeneralPurpose
	}
	set := t.Agents()
	ag, ok := set.Lookup(a.Type)
	if !ok {
		return nil, fmt.Errorf("invalid parameters for %s: params/subagent_type: unknown agent %q; available: %s", ToolName, a.Type, set.names())
	}
	return &Call{Agent: ag, Description: strings.TrimSpace(a.Description), Prompt: a.Prompt}, nil
}

// Call is a validated agent call. The session runs it itself (a subagent
// run is a conversation of the session's), so Execute only reports that it
// was called outside a session.
type Call struct {
	Agent       *Agent
	Description string
	Prompt      string
}

// maxTitle bounds the call's title: it is a label in the editor.
const maxTitle = 80

// Title is the call's description (its first line, shortened).
func (c *Call) Title() string {
	t := c.Description
	if i := strings.IndexByte(t, '\n'); i >= 0 {
		t = strings.TrimSpace(t[:i])
	}
	if r := []rune(t); len(r) > maxTitle {
		t = string(r[:maxTitle-1]) + "…"
	}
	return t
}

// Locations is empty: the task is about no one file.
func (c *Call) Locations() []acp.ToolCallLocation { return nil }

// Confirmation is none: the subagent's own calls ask for themselves.
func (c *Call) Confirmation() tools.Confirmation { return tools.Confirmation{Kind: tools.ConfirmNone} }

// Execute fails: only a session can run a subagent.
func (c *Call) Execute(context.Context, *tools.Env) tools.Result {
	err := fmt.Errorf("the agent tool runs only inside a session")
	return tools.Result{LLMContent: err.Error(), Err: err, ErrType: tools.ErrTypeExecutionFailed}
}
