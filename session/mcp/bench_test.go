package mcp

import (
	"encoding/json"
	"regexp"
	"strings"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/require"

	"github.com/acpd/acpd/acp"
	"github.com/acpd/acpd/session/tools"
)

var validToolName = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)

func FuzzToolName(f *testing.F) {
	f.Add("files", "read")
	f.Add("my.server", "do thing/now")
	f.Add("日本", strings.Repeat("ツ", 40))
	f.Add("", "")
	f.Fuzz(func(t *testing.T, server, tool string) {
		name := toolName(server, tool)
		if !validToolName.MatchString(name) {
			t.Fatalf("toolName(%q, %q) = %q is not a valid tool name", server, tool, name)
		}
		if name != toolName(server, tool) {
			t.Fatal("not deterministic")
		}
		used := map[string]bool{name: true}
		if u := uniqueName(name, server, tool, used); u == name || !validToolName.MatchString(u) {
			t.Fatalf("uniqueName gave %q for taken %q", u, name)
		}
	})
}

func benchTool(b *testing.B) *Tool {
	def := newToolDef(&sdk.Tool{
		Name:        "echo",
		InputSchema: json.RawMessage(`{"type":"object","properties":{"text":{"type":"string"},"times":{"type":"integer","minimum":1}},"required":["text"],"additionalProperties":false}`),
	})
	require.NotNil(b, def.schema)
	return &Tool{name: "mcp__bench__echo", srv: &server{name: "bench"}, def: def}
}

func BenchmarkTool_Build(b *testing.B) {
	tl := benchTool(b)
	args := json.RawMessage(`{"text":"hello world","times":3}`)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := tl.Build(nil, args); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkConvertResult(b *testing.B) {
	res := &sdk.CallToolResult{Content: []sdk.Content{
		&sdk.TextContent{Text: strings.Repeat("line of output\n", 200)},
		&sdk.ImageContent{MIMEType: "image/png", Data: make([]byte, 16<<10)},
		&sdk.ResourceLink{URI: "file:///tmp/x.md", Name: "x.md"},
	}}
	b.ReportAllocs()
	for b.Loop() {
		convertResult(res, 1<<12)
	}
}

func BenchmarkToolName(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		toolName("github.server", "search_repositories_with_a_really_long_name_exceeding_limits")
	}
}

// BenchmarkCall times one tools/call round trip through the client, from
// Build to the converted result, against the stdio test server and the
// SDK's streamable HTTP server on loopback.
func BenchmarkCall(b *testing.B) {
	url, _ := httpServer(b)
	for _, srv := range []acp.MCPServer{
		stdioServer("bench"),
		{Type: "http", Name: "bench", URL: url},
	} {
		name := "transport=stdio"
		if srv.Type == "http" {
			name = "transport=http"
		}
		b.Run(name, func(b *testing.B) {
			opts := Options{ConnectTimeout: 20 * time.Second}
			set, errs := Connect(b.Context(), []acp.MCPServer{srv}, opts)
			if len(errs) > 0 {
				b.Fatal(errs)
			}
			defer set.Close()
			var tl tools.Tool
			for _, t := range set.Tools() {
				if strings.HasSuffix(t.Name(), "__echo") || strings.HasSuffix(t.Name(), "__whoami") {
					tl = t
				}
			}
			if tl == nil {
				b.Fatal("no tool")
			}
			args := json.RawMessage(`{"text":"hello"}`)
			if srv.Type == "http" {
				args = json.RawMessage(`{"greeting":"hello"}`)
			}
			b.ReportAllocs()
			for b.Loop() {
				call, err := tl.Build(nil, args)
				if err != nil {
					b.Fatal(err)
				}
				if res := call.Execute(b.Context(), nil); res.Err != nil {
					b.Fatal(res.Err)
				}
			}
		})
	}
}
