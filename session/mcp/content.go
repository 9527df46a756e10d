package mcp

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"path"
	"slices"
	"strings"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/acpd/acpd/acp"
)

// convertResult maps a tool result to ACP tool-call content (for the
// editor) and to the text fed back to the model. ACP's content blocks have
// MCP's shape, so every block reaches the editor as the server sent it:
// text, images, audio, resource links and embedded resources, with their
// annotations. The model gets text: a text block as is, an embedded text
// resource inlined with its URI, and a line naming each image, audio clip,
// link and binary resource. structuredContent goes to the editor as the
// call's rawOutput and, when the result has no blocks, as JSON text to both.
// A block whose annotations name only the user as its audience is not
// given to the model, and one naming only the assistant is not shown.
// maxBytes > 0 truncates the model text with a note.
func convertResult(res *sdk.CallToolResult, maxBytes int) (string, []acp.ToolCallContent) {
	var llm []string
	var out []acp.ToolCallContent
	for _, c := range res.Content {
		block, text, ok := contentBlock(c)
		if !ok {
			continue
		}
		user, assistant := audience(c)
		if user {
			out = append(out, acp.ToolCallContent{Type: "content", Content: &block})
		}
		if assistant {
			llm = append(llm, text)
		}
	}
	if len(res.Content) == 0 && res.StructuredContent != nil {
		if b, err := json.Marshal(res.StructuredContent); err == nil {
			block := acp.TextBlock(string(b))
			out = append(out, acp.ToolCallContent{Type: "content", Content: &block})
			llm = append(llm, string(b))
		}
	}
	return truncate(strings.Join(llm, "\n"), maxBytes), out
}

// contentBlock is an MCP content block as an ACP one, and what the model
// is told of it. ok is false for blocks a tool result cannot hold.
func contentBlock(c sdk.Content) (acp.ContentBlock, string, bool) {
	switch c := c.(type) {
	case *sdk.TextContent:
		b := acp.TextBlock(c.Text)
		b.Annotations = annotations(c.Annotations)
		return b, c.Text, true
	case *sdk.ImageContent:
		b := acp.ContentBlock{Type: "image", MimeType: c.MIMEType, Data: base64.StdEncoding.EncodeToString(c.Data), Annotations: annotations(c.Annotations)}
		return b, fmt.Sprintf("[image %s, %d bytes]", c.MIMEType, len(c.Data)), true
	case *sdk.AudioContent:
		b := acp.ContentBlock{Type: "audio", MimeType: c.MIMEType, Data: base64.StdEncoding.EncodeToString(c.Data), Annotations: annotations(c.Annotations)}
		return b, fmt.Sprintf("[audio %s, %d bytes]", c.MIMEType, len(c.Data)), true
	case *sdk.ResourceLink:
		name := linkName(c.Name, c.URI)
		b := acp.ContentBlock{Type: "resource_link", URI: c.URI, Name: name, Title: c.Title,
			Description: c.Description, MimeType: c.MIMEType, Size: c.Size, Annotations: annotations(c.Annotations)}
		return b, fmt.Sprintf("[resource %s: %s]", name, c.URI), true
	case *sdk.EmbeddedResource:
		r := c.Resource
		if r == nil {
			return acp.ContentBlock{}, "", false
		}
		b := acp.ContentBlock{Type: "resource", Resource: embedded(r), Annotations: annotations(c.Annotations)}
		return b, resourceText(r), true
	}
	// Sampling-only blocks (tool_use, tool_result): the SDK refuses them
	// in a tool result already.
	return acp.ContentBlock{}, "", false
}

// embedded is MCP resource contents as ACP's.
func embedded(r *sdk.ResourceContents) *acp.EmbeddedResource {
	e := &acp.EmbeddedResource{URI: r.URI, MimeType: r.MIMEType}
	if r.Blob != nil {
		blob := base64.StdEncoding.EncodeToString(r.Blob)
		e.Blob = &blob
	} else {
		text := r.Text
		e.Text = &text
	}
	return e
}

// resourceText is what the model is told of resource contents: a text
// resource in full under its URI, a binary one by name, type and size.
func resourceText(r *sdk.ResourceContents) string {
	if r.Blob != nil {
		return fmt.Sprintf("[resource %s, %s, %d bytes]", r.URI, r.MIMEType, len(r.Blob))
	}
	return fmt.Sprintf("[resource %s]\n%s", r.URI, r.Text)
}

// annotations is a block's annotations as ACP carries them.
func annotations(a *sdk.Annotations) json.RawMessage {
	if a == nil {
		return nil
	}
	b, err := json.Marshal(a)
	if err != nil || string(b) == "{}" {
		return nil
	}
	return b
}

// audience reports whom a block is for: both, unless its annotations name
// only one of the user and the assistant.
func audience(c sdk.Content) (user, assistant bool) {
	var a *sdk.Annotations
	switch c := c.(type) {
	case *sdk.TextContent:
		a = c.Annotations
	case *sdk.ImageContent:
		a = c.Annotations
	case *sdk.AudioContent:
		a = c.Annotations
	case *sdk.ResourceLink:
		a = c.Annotations
	case *sdk.EmbeddedResource:
		a = c.Annotations
	}
	if a == nil || len(a.Audience) == 0 {
		return true, true
	}
	return slices.Contains(a.Audience, sdk.Role("user")), slices.Contains(a.Audience, sdk.Role("assistant"))
}

// linkName is the link's name, or the last element of its URI.
func linkName(name, uri string) string {
	if name != "" {
		return name
	}
	if b := path.Base(uri); b != "." && b != "/" {
		return b
	}
	return uri
}

// truncate cuts s to max bytes (on a rune boundary) and says how much was cut.
func truncate(s string, max int) string {
	if max <= 0 || len(s) <= max {
		return s
	}
	cut := max
	for cut > 0 && !isRuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + fmt.Sprintf("\n[output truncated: %d of %d bytes omitted]", len(s)-cut, len(s))
}

func isRuneStart(b byte) bool { return b&0xC0 != 0x80 }
