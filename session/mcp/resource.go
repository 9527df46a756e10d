package mcp

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/yosida95/uritemplate/v3"

	"github.com/acpd/acpd/acp"
	"github.com/acpd/acpd/session/model"
	"github.com/acpd/acpd/session/tools"
)

// Resources. Decisions:
//   - The model gets one tool, mcp_resources, offered while a server of
//     the session has resources: action "list" (resources and templates,
//     of one server or all), "read" (a URI, through the server that lists
//     it or whose template matches it, or the one named). Reading is
//     read-only by MCP's definition, so the tool runs without asking, in
//     plan mode too; its kind is read.
//   - A prompt's resource_link or resource block names an MCP resource
//     when its URI is one a server lists, matches a server's resource
//     template, or the block's _meta names the server ("server" or
//     "mcpServer"); such a block is read through that server when the
//     prompt is sent, and the model gets what the server returns (text as
//     an embedded resource, an image as an image, other binary contents
//     by a line naming them). A block naming no MCP resource is left as
//     the editor sent it (a workspace file is read by the tools, as
//     before). A read that fails leaves a line saying so.

// ResourceToolName is the model-facing name of the resource tool.
const ResourceToolName = "mcp_resources"

// resourceSchema is the resource tool's parameters.
var resourceSchema = json.RawMessage(`{"type":"object","properties":{` +
	`"action":{"type":"string","enum":["list","read"],"description":"list: the resources and resource templates the MCP servers offer; read: the contents of one resource"},` +
	`"server":{"type":"string","description":"the MCP server to list or read from; optional: list covers every server, read finds the server of the uri"},` +
	`"uri":{"type":"string","description":"for read: the resource's URI, as listed or filled in from a template"}},` +
	`"required":["action"],"additionalProperties":false}`)

// ResourceTool lets the model list and read the servers' resources.
type ResourceTool struct {
	set *Set
}

var (
	_ tools.Tool = (*ResourceTool)(nil)
	_ tools.Call = (*resourceCall)(nil)
)

// resourceTool is the set's resource tool while a server offers resources.
func (st *Set) resourceTool() tools.Tool {
	for _, s := range st.list() {
		s.mu.Lock()
		has := s.lists.caps != nil && s.lists.caps.Resources != nil && (s.conn != nil || s.dead != nil)
		s.mu.Unlock()
		if has {
			return &ResourceTool{set: st}
		}
	}
	return nil
}

func (t *ResourceTool) Name() string { return ResourceToolName }

// Spec names the servers that offer resources; the set of servers is the
// session's, so the description does not change with their listings.
func (t *ResourceTool) Spec() model.ToolSpec {
	var names []string
	for _, s := range t.set.servers {
		names = append(names, s.name)
	}
	return model.ToolSpec{Name: ResourceToolName, Parameters: resourceSchema,
		Description: "Lists and reads the resources of the session's MCP servers (" + strings.Join(names, ", ") + "): files, records and other data they expose by URI. " +
			"Call it with action \"list\" to see what there is, then \"read\" with a uri."}
}

func (t *ResourceTool) Kind() acp.ToolKind { return acp.KindRead }

// FrameMeta is the `_meta` of the tool's frames.
func (t *ResourceTool) FrameMeta() map[string]any {
	return map[string]any{"toolName": ResourceToolName, "provenance": "mcp"}
}

type resourceArgs struct {
	Action string `json:"action"`
	Server string `json:"server"`
	URI    string `json:"uri"`
}

func (t *ResourceTool) Build(_ *tools.Env, args json.RawMessage) (tools.Call, error) {
	var a resourceArgs
	dec := json.NewDecoder(bytes.NewReader(args))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&a); err != nil {
		return nil, fmt.Errorf("%s: invalid arguments: %v", ResourceToolName, err)
	}
	switch a.Action {
	case "list":
	case "read":
		if a.URI == "" {
			return nil, fmt.Errorf("%s: read needs a uri", ResourceToolName)
		}
	default:
		return nil, fmt.Errorf("%s: action must be \"list\" or \"read\", got %q", ResourceToolName, a.Action)
	}
	if a.Server != "" && t.set.server(a.Server) == nil {
		return nil, fmt.Errorf("%s: no MCP server %q in this session (servers: %s)", ResourceToolName, a.Server, strings.Join(t.set.serverNames(), ", "))
	}
	return &resourceCall{set: t.set, args: a}, nil
}

type resourceCall struct {
	set  *Set
	args resourceArgs
}

func (c *resourceCall) Title() string {
	if c.args.Action == "read" {
		return "Read MCP resource " + c.args.URI
	}
	if c.args.Server != "" {
		return "List the resources of MCP server " + c.args.Server
	}
	return "List MCP resources"
}

func (c *resourceCall) Locations() []acp.ToolCallLocation { return nil }

// Confirmation: reading is read-only; nothing to ask.
func (c *resourceCall) Confirmation() tools.Confirmation {
	return tools.Confirmation{Kind: tools.ConfirmNone}
}

func (c *resourceCall) FrameMeta() map[string]any {
	m := map[string]any{"toolName": ResourceToolName, "provenance": "mcp"}
	if c.args.Server != "" {
		m["serverId"] = c.args.Server
	}
	return m
}

func (c *resourceCall) Execute(ctx context.Context, env *tools.Env) tools.Result {
	maxBytes := 0
	if env != nil {
		maxBytes = env.MaxOutputBytes
	}
	if c.args.Action == "list" {
		text := c.set.listResources(c.args.Server)
		return tools.Result{LLMContent: truncate(text, maxBytes), Content: []acp.ToolCallContent{acp.TextContent(text)}}
	}
	s := c.set.server(c.args.Server)
	if s == nil {
		s = c.set.serverOf(c.args.URI)
	}
	if s == nil {
		err := fmt.Errorf("no MCP server of this session lists %s or has a template matching it; name the server", c.args.URI)
		return tools.Result{Err: err, ErrType: ErrTypeExecution, LLMContent: err.Error(), Content: []acp.ToolCallContent{acp.TextContent(err.Error())}}
	}
	res, err := s.readResource(ctx, c.args.URI)
	if err != nil {
		r := tools.Result{Err: err, ErrType: ErrTypeExecution, LLMContent: err.Error()}
		if errors.Is(err, context.Canceled) {
			r.ErrType = ErrTypeCancelled
		}
		r.Content = []acp.ToolCallContent{acp.TextContent(r.LLMContent)}
		return r
	}
	var llm []string
	var out []acp.ToolCallContent
	for _, rc := range res.Contents {
		if rc == nil {
			continue
		}
		b := acp.ContentBlock{Type: "resource", Resource: embedded(rc)}
		out = append(out, acp.ToolCallContent{Type: "content", Content: &b})
		llm = append(llm, resourceText(rc))
	}
	if len(llm) == 0 {
		llm = append(llm, fmt.Sprintf("[resource %s is empty]", c.args.URI))
	}
	return tools.Result{LLMContent: truncate(strings.Join(llm, "\n"), maxBytes), Content: out}
}

// serverNames are the set's servers' names.
func (st *Set) serverNames() []string {
	var out []string
	for _, s := range st.list() {
		out = append(out, s.name)
	}
	return out
}

// listResources is the resources and templates of one server (name) or
// all, one per line.
func (st *Set) listResources(name string) string {
	var b strings.Builder
	for _, s := range st.list() {
		if name != "" && s.name != name {
			continue
		}
		s.mu.Lock()
		rs, ts, caps := s.lists.resources, s.lists.templates, s.lists.caps
		up := s.conn != nil || s.dead != nil
		s.mu.Unlock()
		if !up || caps == nil || caps.Resources == nil {
			if name != "" {
				fmt.Fprintf(&b, "MCP server %q offers no resources.\n", s.name)
			}
			continue
		}
		fmt.Fprintf(&b, "MCP server %q: %d resources, %d templates\n", s.name, len(rs), len(ts))
		for _, r := range rs {
			fmt.Fprintf(&b, "- %s", r.URI)
			if n := cmpOr(r.Title, r.Name); n != "" {
				fmt.Fprintf(&b, " (%s)", n)
			}
			if r.MIMEType != "" {
				fmt.Fprintf(&b, " [%s]", r.MIMEType)
			}
			if r.Description != "" {
				fmt.Fprintf(&b, ": %s", oneLine(r.Description))
			}
			b.WriteByte('\n')
		}
		for _, t := range ts {
			fmt.Fprintf(&b, "- template %s", t.URITemplate)
			if n := cmpOr(t.Title, t.Name); n != "" {
				fmt.Fprintf(&b, " (%s)", n)
			}
			if t.Description != "" {
				fmt.Fprintf(&b, ": %s", oneLine(t.Description))
			}
			b.WriteByte('\n')
		}
	}
	if b.Len() == 0 {
		return "No MCP server of this session offers resources."
	}
	return strings.TrimRight(b.String(), "\n")
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }

// serverOf is the server that lists uri, or else the first whose resource
// template matches it; nil when none does.
func (st *Set) serverOf(uri string) *server {
	for _, s := range st.list() {
		s.mu.Lock()
		rs := s.lists.resources
		s.mu.Unlock()
		if slices.ContainsFunc(rs, func(r *sdk.Resource) bool { return r.URI == uri }) {
			return s
		}
	}
	for _, s := range st.list() {
		s.mu.Lock()
		ts := s.lists.templates
		s.mu.Unlock()
		for _, t := range ts {
			tmpl, err := uritemplate.New(t.URITemplate)
			if err == nil && tmpl.Regexp().MatchString(uri) {
				return s
			}
		}
	}
	return nil
}

// readResource reads uri from the server.
func (s *server) readResource(ctx context.Context, uri string) (*sdk.ReadResourceResult, error) {
	c, err := s.session(ctx)
	if err != nil {
		return nil, err
	}
	var res *sdk.ReadResourceResult
	err = s.do(ctx, c, func(ctx context.Context) error {
		var err error
		res, err = c.cs.ReadResource(ctx, &sdk.ReadResourceParams{URI: uri})
		return err
	})
	return res, err
}

// ReadMentions reads the MCP resources a prompt's resource_link and
// resource blocks name through their servers and returns the prompt with
// those blocks replaced by what the servers returned; changed is false
// (and blocks returned as they are) when no block names one.
func (st *Set) ReadMentions(ctx context.Context, blocks []acp.ContentBlock) (out []acp.ContentBlock, changed bool) {
	if st == nil {
		return blocks, false
	}
	out = make([]acp.ContentBlock, 0, len(blocks))
	for _, b := range blocks {
		uri := b.URI
		if b.Type == "resource" && b.Resource != nil {
			uri = b.Resource.URI
		}
		var s *server
		if b.Type == "resource_link" || b.Type == "resource" {
			s = st.mentioned(b, uri)
		}
		if s == nil {
			out = append(out, b)
			continue
		}
		changed = true
		res, err := s.readResource(ctx, uri)
		if err != nil {
			if ctx.Err() != nil {
				return blocks, false
			}
			out = append(out, acp.TextBlock(fmt.Sprintf("[MCP resource %s could not be read: %v]", uri, err)))
			continue
		}
		n := len(out)
		for _, rc := range res.Contents {
			if rc != nil {
				out = append(out, contentsBlock(rc))
			}
		}
		if len(out) == n {
			out = append(out, acp.TextBlock(fmt.Sprintf("[MCP resource %s is empty]", uri)))
		}
	}
	if !changed {
		return blocks, false
	}
	return out, true
}

// mentioned is the server a prompt block names a resource of, or nil.
func (st *Set) mentioned(b acp.ContentBlock, uri string) *server {
	if uri == "" {
		return nil
	}
	for _, key := range []string{"server", "mcpServer"} {
		if name, ok := b.Meta[key].(string); ok {
			if s := st.server(name); s != nil {
				return s
			}
		}
	}
	return st.serverOf(uri)
}
