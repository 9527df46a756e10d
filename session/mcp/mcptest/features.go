package mcptest

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Resource URIs and texts of the test server (the TypeScript twin serves
// the same).
const (
	NotesURI  = "mem://notes/todo.md"
	NotesText = "- buy milk\n- write the MCP docs"
	UserURI   = "mem://users/{id}"
	InlineURI = "mem://inline.txt"
	BlobURI   = "mem://blob.bin"
)

// wav is a tiny audio clip (a RIFF header is enough for the tests).
var wav = []byte("RIFF\x24\x00\x00\x00WAVEfmt ")

// addFeatures adds what the end-to-end tests check: every content type,
// list_changed, progress, elicitations, -32042, prompts and resources.
func addFeatures(s *mcp.Server) {
	empty := json.RawMessage(`{"type":"object"}`)

	s.AddTool(&mcp.Tool{Name: "everything", Description: "Returns one block of every content type and structured content.", InputSchema: empty},
		func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			size := int64(len(NotesText))
			return &mcp.CallToolResult{
				Content: []mcp.Content{
					&mcp.TextContent{Text: "all kinds"},
					&mcp.ImageContent{MIMEType: "image/png", Data: pngPixel},
					&mcp.AudioContent{MIMEType: "audio/wav", Data: wav},
					&mcp.ResourceLink{URI: NotesURI, Name: "todo.md", MIMEType: "text/markdown", Size: &size},
					&mcp.EmbeddedResource{Resource: &mcp.ResourceContents{URI: InlineURI, MIMEType: "text/plain", Text: "inline text"}},
					&mcp.EmbeddedResource{Resource: &mcp.ResourceContents{URI: BlobURI, MIMEType: "application/octet-stream", Blob: []byte{1, 2, 3}}},
				},
				StructuredContent: map[string]any{"kinds": 6},
			}, nil
		})

	var addOnce sync.Once
	s.AddTool(&mcp.Tool{Name: "add_tool", Description: "Adds the tool \"added\" (the server then says its tools changed).", InputSchema: empty},
		func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			addOnce.Do(func() {
				s.AddTool(&mcp.Tool{Name: "added", Description: "Added at run time.", InputSchema: empty},
					func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
						return text("I was added"), nil
					})
			})
			return text("tool added"), nil
		})

	s.AddTool(&mcp.Tool{Name: "progress", Description: "Reports progress three times, then answers.", InputSchema: empty},
		func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			token := req.Params.GetProgressToken()
			for i := 1; i <= 3 && token != nil; i++ {
				_ = req.Session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{ProgressToken: token, Progress: float64(i), Total: 3, Message: fmt.Sprintf("step %d", i)})
				time.Sleep(150 * time.Millisecond)
			}
			return text("progressed"), nil
		})

	s.AddTool(&mcp.Tool{Name: "ask_form", Description: "Asks the user for a name and a colour (form elicitation).", InputSchema: empty},
		func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			res, err := req.Session.Elicit(ctx, &mcp.ElicitParams{
				Message: "Who are you?",
				RequestedSchema: json.RawMessage(`{"type":"object","properties":{` +
					`"name":{"type":"string","title":"Name","minLength":1},` +
					`"color":{"type":"string","title":"Colour","enum":["red","green"]}},"required":["name"]}`),
			})
			if err != nil {
				return nil, err
			}
			return text(fmt.Sprintf("form: action=%s name=%v color=%v", res.Action, res.Content["name"], res.Content["color"])), nil
		})

	s.AddTool(&mcp.Tool{Name: "ask_url", Description: "Asks the user to open a page (URL elicitation).", InputSchema: empty},
		func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			res, err := req.Session.Elicit(ctx, &mcp.ElicitParams{Mode: "url", Message: "Open the consent page", URL: "https://example.com/consent?flow=1", ElicitationID: "el-1"})
			if err != nil {
				return nil, err
			}
			if res.Action == "accept" {
				_ = req.Session.NotifyElicitationComplete(ctx, &mcp.ElicitationCompleteParams{ElicitationID: "el-1"})
			}
			return text("url: action=" + res.Action), nil
		})

	var consented sync.Map // by session id
	s.AddTool(&mcp.Tool{Name: "needs_url", Description: "Answers -32042 until the user opened a page.", InputSchema: empty},
		func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			if _, ok := consented.Load(req.Session); ok {
				return text("needs_url: done after consent"), nil
			}
			consented.Store(req.Session, true)
			ss := req.Session
			go func() {
				// The user finishes on the page a moment later.
				time.Sleep(500 * time.Millisecond)
				_ = ss.NotifyElicitationComplete(context.Background(), &mcp.ElicitationCompleteParams{ElicitationID: "el-2"})
			}()
			return nil, mcp.URLElicitationRequiredError([]*mcp.ElicitParams{{Mode: "url", Message: "Sign in to the archive first", URL: "https://example.com/archive-login", ElicitationID: "el-2"}})
		})

	s.AddPrompt(&mcp.Prompt{Name: "greet", Description: "Greets someone.", Arguments: []*mcp.PromptArgument{
		{Name: "name", Description: "whom to greet", Required: true},
		{Name: "style", Description: "how"},
	}}, func(_ context.Context, req *mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
		style := req.Params.Arguments["style"]
		if style == "" {
			style = "plain"
		}
		return &mcp.GetPromptResult{Messages: []*mcp.PromptMessage{
			{Role: "user", Content: &mcp.TextContent{Text: fmt.Sprintf("Greet %s in a %s way.", req.Params.Arguments["name"], style)}},
		}}, nil
	})
	s.AddPrompt(&mcp.Prompt{Name: "with_resource", Description: "Asks about the notes, which it embeds."},
		func(context.Context, *mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
			return &mcp.GetPromptResult{Messages: []*mcp.PromptMessage{
				{Role: "user", Content: &mcp.TextContent{Text: "What is left to do?"}},
				{Role: "user", Content: &mcp.EmbeddedResource{Resource: &mcp.ResourceContents{URI: NotesURI, MIMEType: "text/markdown", Text: NotesText}}},
			}}, nil
		})

	s.AddResource(&mcp.Resource{URI: NotesURI, Name: "todo.md", MIMEType: "text/markdown", Description: "The to-do list."},
		func(context.Context, *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
			return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: NotesURI, MIMEType: "text/markdown", Text: NotesText}}}, nil
		})
	s.AddResourceTemplate(&mcp.ResourceTemplate{URITemplate: UserURI, Name: "user", MIMEType: "text/plain", Description: "A user by id."},
		func(_ context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
			id := strings.TrimPrefix(req.Params.URI, "mem://users/")
			return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: req.Params.URI, MIMEType: "text/plain", Text: "user " + id}}}, nil
		})
}
