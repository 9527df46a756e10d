package mcp

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/google/jsonschema-go/jsonschema"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/acpd/acpd/acp"
	"github.com/acpd/acpd/session/model"
	"github.com/acpd/acpd/session/tools"
)

// MaxToolNameLen is the longest model-facing tool name (OpenAI's limit).
const MaxToolNameLen = 64

// Error types of failed MCP calls, for the repeated-failure guard.
const (
	ErrTypeMCPTool   = "MCP_TOOL_ERROR"   // the tool answered isError
	ErrTypeExecution = "EXECUTION_FAILED" // the call did not complete
	ErrTypeTimeout   = "TIMEOUT"
	ErrTypeCancelled = "CANCELLED"
)

// anyObject is the parameter schema of a tool whose own schema is unusable.
var anyObject = json.RawMessage(`{"type":"object"}`)

// toolDef is one listed tool with its resolved input schema.
type toolDef struct {
	name        string
	title       string
	description string
	params      json.RawMessage      // what the model sees
	schema      *jsonschema.Resolved // nil: any object
}

func newToolDef(t *sdk.Tool) *toolDef {
	d := &toolDef{name: t.Name, title: t.Title, description: t.Description, params: anyObject}
	if d.title == "" && t.Annotations != nil {
		d.title = t.Annotations.Title
	}
	if d.description == "" {
		d.description = d.title
	}
	if t.InputSchema == nil {
		return d
	}
	raw, err := json.Marshal(t.InputSchema)
	if err != nil || bytes.Equal(raw, []byte("null")) {
		return d
	}
	rs, err := resolveSchema(raw)
	if err != nil {
		// An unusable schema must not cost the user the tool: accept any
		// object and let the server judge the arguments.
		return d
	}
	d.params, d.schema = raw, rs
	return d
}

// resolveSchema compiles a tool's input schema with the JSON Schema
// library the SDK brings. The root must describe an object.
func resolveSchema(raw []byte) (*jsonschema.Resolved, error) {
	var sch jsonschema.Schema
	if err := json.Unmarshal(raw, &sch); err != nil {
		return nil, err
	}
	if sch.Type != "" && sch.Type != "object" {
		return nil, fmt.Errorf("the input schema's type is %q, not object", sch.Type)
	}
	return sch.Resolve(nil)
}

// toolName is mcp__<server>__<tool> with every character outside [A-Za-z0-9_-]
// replaced by '_', shortened to MaxToolNameLen with a hash of the original
// names when too long.
func toolName(serverName, tool string) string {
	name := "mcp__" + sanitize(serverName) + "__" + sanitize(tool)
	if len(name) <= MaxToolNameLen {
		return name
	}
	h := nameHash(serverName, tool)
	return name[:MaxToolNameLen-len(h)-1] + "_" + h
}

// uniqueName disambiguates names that collide after sanitising or
// shortening with a deterministic hash suffix (re-hashed with a counter
// until free, since the name may already end in a hash).
func uniqueName(name, serverName, tool string, used map[string]bool) string {
	cand := name
	for i := 0; used[cand]; i++ {
		h := nameHash(serverName, tool+"\x00"+strconv.Itoa(i))
		base := name
		if len(base) > MaxToolNameLen-len(h)-1 {
			base = base[:MaxToolNameLen-len(h)-1]
		}
		cand = base + "_" + h
	}
	return cand
}

func nameHash(serverName, tool string) string {
	sum := sha256.Sum256([]byte(serverName + "\x00" + tool))
	return hex.EncodeToString(sum[:4])
}

func sanitize(s string) string {
	var b strings.Builder
	for _, r := range s {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '_', r == '-':
			b.WriteRune(r)
		default:
			b.WriteByte('_')
		}
	}
	return b.String()
}

// Tool is one MCP server tool as a tools.Tool.
type Tool struct {
	name string
	srv  *server
	def  *toolDef
}

var (
	_ tools.Tool  = (*Tool)(nil)
	_ FrameMetaer = (*Tool)(nil)
	_ tools.Call  = (*Call)(nil)
	_ FrameMetaer = (*Call)(nil)
)

// Name is the model-facing name, mcp__<server>__<tool>.
func (t *Tool) Name() string { return t.name }

// ServerName is the name of the server the tool belongs to.
func (t *Tool) ServerName() string { return t.srv.name }

// MCPName is the tool's name on its server.
func (t *Tool) MCPName() string { return t.def.name }

// RuleNames are the server and tool names as a permission rule spells
// them (mcp__server__tool): sanitised as in the model-facing name, never
// shortened, so a rule matches a tool whose name was.
func (t *Tool) RuleNames() (server, tool string) { return sanitize(t.srv.name), sanitize(t.def.name) }

// Spec offers the server's description and input schema to the model.
func (t *Tool) Spec() model.ToolSpec {
	return model.ToolSpec{Name: t.name, Description: t.def.description, Parameters: t.def.params}
}

// Kind is always other: an MCP tool's effects are unknown.
func (t *Tool) Kind() acp.ToolKind { return acp.KindOther }

// FrameMeta is the `_meta` of the tool's frames.
func (t *Tool) FrameMeta() map[string]any {
	return map[string]any{"toolName": t.name, "provenance": "mcp", "serverId": t.srv.name, "mcpToolName": t.def.name}
}

// Build checks that args is a JSON object valid against the server's input
// schema (any object when that schema could not be compiled).
func (t *Tool) Build(_ *tools.Env, args json.RawMessage) (tools.Call, error) {
	trimmed := bytes.TrimSpace(args)
	if len(trimmed) == 0 || bytes.Equal(trimmed, []byte("null")) {
		trimmed = []byte("{}")
	}
	var v any
	if err := json.Unmarshal(trimmed, &v); err != nil {
		return nil, fmt.Errorf("%s: arguments are not valid JSON: %v", t.name, err)
	}
	if _, ok := v.(map[string]any); !ok {
		return nil, fmt.Errorf("%s: arguments must be a JSON object", t.name)
	}
	if t.def.schema != nil {
		if err := tools.CheckArgs(t.def.schema, v); err != nil {
			return nil, fmt.Errorf("%s: invalid arguments: %v", t.name, err)
		}
	}
	return &Call{tool: t, args: json.RawMessage(trimmed)}, nil
}

// Call is a validated call of an MCP tool.
type Call struct {
	tool *Tool
	args json.RawMessage
}

// Title is "<server>: <tool>".
func (c *Call) Title() string { return c.tool.srv.name + ": " + c.tool.def.name }

// Locations is empty: MCP tools do not say which files they touch.
func (c *Call) Locations() []acp.ToolCallLocation { return nil }

// Confirmation asks as an MCP call, labelled with the tool name (what an
// "always allow" covers); it shows the arguments.
func (c *Call) Confirmation() tools.Confirmation {
	conf := tools.Confirmation{Kind: tools.ConfirmMCP, Label: c.tool.name}
	if !bytes.Equal(c.args, []byte("{}")) {
		var pretty bytes.Buffer
		if json.Indent(&pretty, c.args, "", "  ") == nil {
			conf.Content = []acp.ToolCallContent{acp.TextContent(pretty.String())}
		}
	}
	return conf
}

// FrameMeta is the `_meta` of the call's frames.
func (c *Call) FrameMeta() map[string]any { return c.tool.FrameMeta() }

// Arguments is the validated JSON object sent to the server.
func (c *Call) Arguments() json.RawMessage { return c.args }

// Execute calls the tool on its server. Cancelling ctx returns at once and
// the server is told (notifications/cancelled); the server's progress
// reaches the editor as tool_call_update, and its elicitations as
// elicitation/create tied to the call.
func (c *Call) Execute(ctx context.Context, env *tools.Env) tools.Result {
	cs := &callState{ctx: ctx}
	maxBytes := 0
	if env != nil {
		maxBytes = env.MaxOutputBytes
		cs.toolCallID, cs.update = env.ToolCallID, env.Update
	}
	res, err := c.tool.srv.callTool(ctx, c.tool.def.name, c.args, cs)
	if err != nil {
		r := tools.Result{Err: err, ErrType: ErrTypeExecution, LLMContent: err.Error()}
		switch {
		case errors.Is(err, context.Canceled):
			r.ErrType, r.LLMContent = ErrTypeCancelled, fmt.Sprintf("The call of %s was cancelled.", c.tool.name)
		case errors.Is(err, context.DeadlineExceeded):
			r.ErrType, r.LLMContent = ErrTypeTimeout, fmt.Sprintf("The call of %s timed out.", c.tool.name)
		}
		r.Content = []acp.ToolCallContent{acp.TextContent(r.LLMContent)}
		return r
	}
	llm, content := convertResult(res, maxBytes)
	r := tools.Result{LLMContent: llm, Content: content, RawOutput: res.StructuredContent}
	if res.IsError {
		msg := llm
		if msg == "" {
			msg = fmt.Sprintf("mcp tool %s reported an error", c.tool.name)
			r.LLMContent = msg
		}
		r.Err, r.ErrType = errors.New(msg), ErrTypeMCPTool
	}
	return r
}

// callTool runs one tools/call: progress and elicitations are tied to cs,
// and a -32042 (URL elicitation required) is elicited and the call retried
// once.
func (s *server) callTool(ctx context.Context, tool string, args json.RawMessage, cs *callState) (*sdk.CallToolResult, error) {
	c, err := s.session(ctx)
	if err != nil {
		return nil, err
	}
	if _, ok := s.lookup(tool); !ok {
		return nil, fmt.Errorf("mcp server %q no longer offers tool %q", s.name, tool)
	}
	if d := s.extra().CallTimeout; d > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, d)
		defer cancel()
	}
	ctx = withCall(ctx, cs)
	token, untrack := s.track(cs)
	defer untrack()
	var res *sdk.CallToolResult
	call := func(ctx context.Context) error {
		p := &sdk.CallToolParams{Name: tool, Arguments: args}
		p.SetProgressToken(token)
		var err error
		res, err = c.cs.CallTool(ctx, p)
		return err
	}
	err = s.do(ctx, c, call)
	if elicitations, ok := urlRequired(err); ok {
		if err := s.elicitURLs(ctx, cs, elicitations); err != nil {
			return nil, err
		}
		err = s.do(ctx, c, call)
	}
	return res, err
}
