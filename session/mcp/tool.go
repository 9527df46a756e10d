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

// toolDef is one listed tool with its compiled input schema.
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
	if err != nil {
		return d
	}
	sch, err := compileSchema(raw)
	if err != nil {
		// An unusable schema must not cost the user the tool: accept any
		// object and let the server judge the arguments.
		return d
	}
	d.params, d.schema = raw, sch
	return d
}

// compileSchema prepares a server's input schema for validating the
// model's arguments. It uses the JSON Schema implementation the MCP SDK
// itself links (drafts 2020-12 and 07, the dialects MCP servers emit), so
// no second library and its package init are in the binary. A $ref outside
// the schema is refused (the default without a loader): a server's schema
// must not make the daemon read files or fetch URLs.
func compileSchema(raw []byte) (*jsonschema.Resolved, error) {
	var doc any
	if err := json.Unmarshal(raw, &doc); err != nil {
		return nil, err
	}
	if _, ok := doc.(map[string]any); !ok {
		return nil, errors.New("input schema is not an object")
	}
	var s jsonschema.Schema
	if err := json.Unmarshal(raw, &s); err != nil {
		return nil, err
	}
	dialect, ok := dialects[strings.TrimSuffix(s.Schema, "#")]
	if !ok {
		// Another draft's keywords mean other things (draft-04's boolean
		// exclusiveMinimum, 2019-09's array items): validating them as
		// 2020-12 could refuse good arguments, so the server judges.
		return nil, fmt.Errorf("input schema dialect %q is not supported", s.Schema)
	}
	s.Schema = dialect
	if err := checkTypeNames(&s); err != nil {
		return nil, err
	}
	return s.Resolve(nil)
}

// dialects maps each accepted $schema, without a trailing '#' (servers
// write it both ways), to the spelling the validator knows.
var dialects = map[string]string{
	"": "",
	"https://json-schema.org/draft/2020-12/schema": "https://json-schema.org/draft/2020-12/schema",
	"http://json-schema.org/draft-07/schema":       "http://json-schema.org/draft-07/schema#",
	"https://json-schema.org/draft-07/schema":      "https://json-schema.org/draft-07/schema#",
}

// checkTypeNames refuses a "type" that names no JSON type anywhere in the
// schema (the validator would otherwise refuse every value there): such a
// schema is unusable and the tool falls back to any object.
func checkTypeNames(s *jsonschema.Schema) error {
	var bad error
	walkSchema(s, func(s *jsonschema.Schema) {
		for _, t := range append([]string{s.Type}, s.Types...) {
			switch t {
			case "", "object", "array", "string", "integer", "number", "boolean", "null":
			default:
				if bad == nil {
					bad = fmt.Errorf("type %q is not a JSON type", t)
				}
			}
		}
	})
	return bad
}

// walkSchema calls f on s and every schema inside it.
func walkSchema(s *jsonschema.Schema, f func(*jsonschema.Schema)) {
	if s == nil {
		return
	}
	f(s)
	for _, sub := range []*jsonschema.Schema{s.AdditionalItems, s.Contains, s.UnevaluatedItems, s.Items,
		s.AdditionalProperties, s.PropertyNames, s.UnevaluatedProperties, s.Not, s.If, s.Then, s.Else, s.ContentSchema} {
		walkSchema(sub, f)
	}
	for _, list := range [][]*jsonschema.Schema{s.PrefixItems, s.ItemsArray, s.AllOf, s.AnyOf, s.OneOf} {
		for _, sub := range list {
			walkSchema(sub, f)
		}
	}
	for _, m := range []map[string]*jsonschema.Schema{s.Defs, s.Definitions, s.DependencySchemas,
		s.Properties, s.PatternProperties, s.DependentSchemas} {
		for _, sub := range m {
			walkSchema(sub, f)
		}
	}
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
		if err := t.def.schema.Validate(v); err != nil {
			return nil, fmt.Errorf("%s: invalid arguments: %s", t.name, validationText(err))
		}
	}
	return &Call{tool: t, args: json.RawMessage(trimmed)}, nil
}

// validationText is the validator's error without its leading "validating
// root: ": the rest names the schema location and what was wrong there
// ("validating /properties/text: type: 5 has type "integer", want "string"").
func validationText(err error) string {
	return strings.TrimPrefix(err.Error(), "validating root: ")
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
// the SDK tells the server (notifications/cancelled).
func (c *Call) Execute(ctx context.Context, env *tools.Env) tools.Result {
	res, err := c.tool.srv.call(ctx, c.tool.def.name, c.args)
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
	maxBytes := 0
	if env != nil {
		maxBytes = env.MaxOutputBytes
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

// jsonObject is args as CallTool arguments (already a validated object).
func jsonObject(args []byte) json.RawMessage {
	if len(args) == 0 {
		return json.RawMessage("{}")
	}
	return json.RawMessage(args)
}
