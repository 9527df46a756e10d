package mcp

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
)

// protocolVersion is the MCP revision acpd asks for in initialize: the
// newest one with the initialize handshake (the official SDK falls back to
// it for every server without the stateless server/discover of 2026-07-28).
const protocolVersion = "2025-11-25"

// knownVersions are the revisions a server may answer initialize with; all
// share the handshake, tools/list and tools/call as acpd uses them.
var knownVersions = []string{"2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05"}

// clientInfo is MCP's Implementation.
type clientInfo struct {
	Name    string `json:"name"`
	Version string `json:"version"`
}

type initializeParams struct {
	ProtocolVersion string         `json:"protocolVersion"`
	Capabilities    map[string]any `json:"capabilities"`
	ClientInfo      clientInfo     `json:"clientInfo"`
}

type initializeResult struct {
	ProtocolVersion string `json:"protocolVersion"`
	ServerInfo      struct {
		Name    string `json:"name"`
		Version string `json:"version"`
	} `json:"serverInfo"`
}

// mcpTool is one entry of tools/list.
type mcpTool struct {
	Name        string          `json:"name"`
	Title       string          `json:"title,omitempty"`
	Description string          `json:"description,omitempty"`
	InputSchema json.RawMessage `json:"inputSchema,omitempty"`
	Annotations *struct {
		Title string `json:"title,omitempty"`
	} `json:"annotations,omitempty"`
}

type listToolsResult struct {
	Tools      []*mcpTool `json:"tools"`
	NextCursor string     `json:"nextCursor,omitempty"`
}

type callToolParams struct {
	Name      string          `json:"name"`
	Arguments json.RawMessage `json:"arguments"`
}

// callToolResult is what tools/call answers.
type callToolResult struct {
	Content           []contentBlock `json:"content"`
	StructuredContent any            `json:"structuredContent,omitempty"`
	IsError           bool           `json:"isError,omitempty"`
}

// contentBlock is one MCP content block of any type; raw keeps the block
// as sent for types acpd does not map.
type contentBlock struct {
	Type        string            `json:"type"`
	Text        string            `json:"text,omitempty"`
	Data        []byte            `json:"data,omitempty"` // base64 on the wire
	MIMEType    string            `json:"mimeType,omitempty"`
	URI         string            `json:"uri,omitempty"`
	Name        string            `json:"name,omitempty"`
	Title       string            `json:"title,omitempty"`
	Description string            `json:"description,omitempty"`
	Size        *int64            `json:"size,omitempty"`
	Resource    *resourceContents `json:"resource,omitempty"`
	raw         json.RawMessage
}

type resourceContents struct {
	URI      string `json:"uri"`
	MIMEType string `json:"mimeType,omitempty"`
	Text     string `json:"text,omitempty"`
	Blob     []byte `json:"blob,omitempty"` // base64 on the wire
}

func (b *contentBlock) UnmarshalJSON(data []byte) error {
	type plain contentBlock
	var p plain
	if err := json.Unmarshal(data, &p); err != nil {
		return fmt.Errorf("content block: %w", err)
	}
	*b = contentBlock(p)
	b.raw = append(json.RawMessage(nil), data...)
	return nil
}

// session is an initialised MCP client session over one rpc.
type session struct {
	rpc     *rpc
	version string
}

// initialize runs the MCP handshake: initialize, check the version the
// server chose, then notifications/initialized.
func initialize(ctx context.Context, c *rpc, version string) (*session, error) {
	params := initializeParams{
		ProtocolVersion: protocolVersion,
		// What the SDK advertised by default; roots/list is answered with
		// no roots.
		Capabilities: map[string]any{"roots": map[string]any{"listChanged": true}},
		ClientInfo:   clientInfo{Name: "acpd", Version: version},
	}
	var res initializeResult
	if err := c.call(ctx, "initialize", params, &res); err != nil {
		return nil, err
	}
	if !slices.Contains(knownVersions, res.ProtocolVersion) {
		return nil, fmt.Errorf("the server chose protocol version %q; acpd speaks %v", res.ProtocolVersion, knownVersions)
	}
	c.t.initialized(res.ProtocolVersion)
	if err := c.notify(ctx, "notifications/initialized", nil); err != nil {
		return nil, err
	}
	return &session{rpc: c, version: res.ProtocolVersion}, nil
}

func (s *session) listTools(ctx context.Context, cursor string) (*listToolsResult, error) {
	var params any
	if cursor != "" {
		params = map[string]string{"cursor": cursor}
	}
	var res listToolsResult
	if err := s.rpc.call(ctx, "tools/list", params, &res); err != nil {
		return nil, err
	}
	return &res, nil
}

func (s *session) callTool(ctx context.Context, name string, args json.RawMessage) (*callToolResult, error) {
	var res callToolResult
	if err := s.rpc.call(ctx, "tools/call", callToolParams{Name: name, Arguments: args}, &res); err != nil {
		return nil, err
	}
	return &res, nil
}
