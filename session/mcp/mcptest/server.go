// Package mcptest is the MCP server of acpd's tests, on the official Go
// SDK: the tools the session/mcp tests exercise (text, slow and cancellable
// calls, isError results, a crash, images, resources, environment passing,
// pagination), and the features the end-to-end tests check through the
// built binary: a tool returning every content type, a tool that adds a
// tool (tools/list_changed), progress, form and URL elicitations, a
// -32042 answer, prompts, resources and a resource template. The
// TypeScript SDK's twin is session/testdata/mcpts/server.mjs.
package mcptest

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// pngPixel is a 1×1 transparent PNG.
var pngPixel = []byte{
	0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a, 0x00, 0x00, 0x00, 0x0d,
	0x49, 0x48, 0x44, 0x52, 0x00, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x01,
	0x08, 0x06, 0x00, 0x00, 0x00, 0x1f, 0x15, 0xc4, 0x89, 0x00, 0x00, 0x00,
	0x0d, 0x49, 0x44, 0x41, 0x54, 0x78, 0x9c, 0x63, 0x00, 0x01, 0x00, 0x00,
	0x05, 0x00, 0x01, 0x0d, 0x0a, 0x2d, 0xb4, 0x00, 0x00, 0x00, 0x00, 0x49,
	0x45, 0x4e, 0x44, 0xae, 0x42, 0x60, 0x82,
}

// NewServer is the test server; pageSize > 0 pages its listings.
func NewServer(pageSize int, logger *slog.Logger) *mcp.Server {
	s := mcp.NewServer(&mcp.Implementation{Name: "mcptest", Version: "1.0.0"}, &mcp.ServerOptions{PageSize: pageSize, Logger: logger})
	addTools(s)
	addFeatures(s)
	return s
}

func text(s string) *mcp.CallToolResult {
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: s}}}
}

func addTools(s *mcp.Server) {
	var running, cancelled atomic.Int64

	s.AddTool(&mcp.Tool{
		Name:        "echo",
		Description: "Echoes its text argument.",
		InputSchema: json.RawMessage(`{"type":"object","properties":{"text":{"type":"string"},"times":{"type":"integer","minimum":1}},"required":["text"],"additionalProperties":false}`),
	}, func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		var in struct {
			Text  string `json:"text"`
			Times int    `json:"times"`
		}
		if err := json.Unmarshal(req.Params.Arguments, &in); err != nil {
			return nil, err
		}
		out := in.Text
		for i := 1; i < in.Times; i++ {
			out += " " + in.Text
		}
		return text("echo: " + out), nil
	})

	s.AddTool(&mcp.Tool{
		Name:        "slow",
		Description: "Sleeps for ms milliseconds or until cancelled.",
		InputSchema: json.RawMessage(`{"type":"object","properties":{"ms":{"type":"integer"}}}`),
	}, func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		var in struct {
			MS int `json:"ms"`
		}
		if err := json.Unmarshal(req.Params.Arguments, &in); err != nil {
			return nil, err
		}
		running.Add(1)
		defer running.Add(-1)
		t := time.NewTimer(time.Duration(in.MS) * time.Millisecond)
		defer t.Stop()
		select {
		case <-t.C:
			return text("slept " + strconv.Itoa(in.MS) + "ms"), nil
		case <-ctx.Done():
			cancelled.Add(1)
			return nil, ctx.Err()
		}
	})

	s.AddTool(&mcp.Tool{
		Name:        "stats",
		Description: "Reports how many slow calls are running and how many were cancelled.",
		InputSchema: json.RawMessage(`{"type":"object"}`),
	}, func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return text(fmt.Sprintf("running=%d cancelled=%d", running.Load(), cancelled.Load())), nil
	})

	s.AddTool(&mcp.Tool{
		Name:        "fail",
		Description: "Always fails with isError.",
		InputSchema: json.RawMessage(`{"type":"object"}`),
	}, func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: "it failed on purpose"}}}, nil
	})

	s.AddTool(&mcp.Tool{
		Name:        "crash",
		Description: "Exits the server process.",
		InputSchema: json.RawMessage(`{"type":"object"}`),
	}, func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		os.Exit(3)
		return nil, nil
	})

	s.AddTool(&mcp.Tool{
		Name:        "image",
		Description: "Returns a tiny PNG.",
		InputSchema: json.RawMessage(`{"type":"object"}`),
	}, func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{
			&mcp.TextContent{Text: "a pixel"},
			&mcp.ImageContent{MIMEType: "image/png", Data: pngPixel},
		}}, nil
	})

	s.AddTool(&mcp.Tool{
		Name:        "resource",
		Description: "Returns a resource link, an embedded text resource and an embedded blob.",
		InputSchema: json.RawMessage(`{"type":"object"}`),
	}, func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{
			&mcp.ResourceLink{URI: "file:///tmp/notes.md", Name: "notes.md", MIMEType: "text/markdown"},
			&mcp.EmbeddedResource{Resource: &mcp.ResourceContents{URI: "mem://greeting", MIMEType: "text/plain", Text: "hello there"}},
			&mcp.EmbeddedResource{Resource: &mcp.ResourceContents{URI: "mem://blob", MIMEType: "application/octet-stream", Blob: []byte{1, 2, 3}}},
		}}, nil
	})

	s.AddTool(&mcp.Tool{
		Name:        "env",
		Description: "Returns the value of an environment variable.",
		InputSchema: json.RawMessage(`{"type":"object","properties":{"name":{"type":"string"}},"required":["name"]}`),
	}, func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		var in struct {
			Name string `json:"name"`
		}
		if err := json.Unmarshal(req.Params.Arguments, &in); err != nil {
			return nil, err
		}
		v, ok := os.LookupEnv(in.Name)
		if !ok {
			return text("unset"), nil
		}
		return text("value=" + v), nil
	})

	s.AddTool(&mcp.Tool{
		Name:        "pid",
		Description: "Returns the server's process id.",
		InputSchema: json.RawMessage(`{"type":"object"}`),
	}, func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return text(strconv.Itoa(os.Getpid())), nil
	})

	s.AddTool(&mcp.Tool{
		Name:        "spawn",
		Description: "Starts a long-lived grandchild process and returns its pid.",
		InputSchema: json.RawMessage(`{"type":"object"}`),
	}, func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		cmd := exec.Command("sleep", "300")
		if err := cmd.Start(); err != nil {
			return nil, err
		}
		return text(strconv.Itoa(cmd.Process.Pid)), nil
	})

	// An input schema the client cannot compile: it must fall back to "any object".
	s.AddTool(&mcp.Tool{
		Name:        "loose",
		Description: "Has a broken input schema.",
		InputSchema: json.RawMessage(`{"type":"object","properties":{"a":{"$ref":"#/$defs/missing"}}}`),
	}, func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return text("got " + string(req.Params.Arguments)), nil
	})

	// A name that needs sanitising for model-facing tool names.
	s.AddTool(&mcp.Tool{
		Name:        "dotted.name",
		Description: "Has a dot in its name.",
		InputSchema: json.RawMessage(`{"type":"object"}`),
	}, func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return text("dotted"), nil
	})
}
