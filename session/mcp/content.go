package mcp

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"path"
	"strings"

	"github.com/acpd/acpd/acp"
)

// convertResult maps MCP content blocks to ACP tool-call content (for the
// client) and to the text fed back to the model. Text stays text; images
// and audio become ACP image/audio blocks (the model gets a placeholder
// naming them); resource links stay resource links; embedded text resources
// become text and embedded blobs become resource links. Structured content
// is used as JSON text when there are no blocks. maxBytes > 0 truncates the
// model text with a note.
func convertResult(res *callToolResult, maxBytes int) (string, []acp.ToolCallContent) {
	var llm []string
	var out []acp.ToolCallContent
	add := func(b acp.ContentBlock) {
		out = append(out, acp.ToolCallContent{Type: "content", Content: &b})
	}
	for _, c := range res.Content {
		switch c.Type {
		case "text":
			add(acp.TextBlock(c.Text))
			llm = append(llm, c.Text)
		case "image":
			add(acp.ContentBlock{Type: "image", MimeType: c.MIMEType, Data: base64.StdEncoding.EncodeToString(c.Data)})
			llm = append(llm, fmt.Sprintf("[image %s, %d bytes]", c.MIMEType, len(c.Data)))
		case "audio":
			add(acp.ContentBlock{Type: "audio", MimeType: c.MIMEType, Data: base64.StdEncoding.EncodeToString(c.Data)})
			llm = append(llm, fmt.Sprintf("[audio %s, %d bytes]", c.MIMEType, len(c.Data)))
		case "resource_link":
			add(acp.ContentBlock{Type: "resource_link", URI: c.URI, Name: linkName(c.Name, c.URI), Title: c.Title,
				Description: c.Description, MimeType: c.MIMEType, Size: c.Size})
			llm = append(llm, fmt.Sprintf("[resource %s: %s]", linkName(c.Name, c.URI), c.URI))
		case "resource":
			r := c.Resource
			if r == nil {
				continue
			}
			if r.Blob == nil {
				add(acp.TextBlock(r.Text))
				llm = append(llm, fmt.Sprintf("[resource %s]\n%s", r.URI, r.Text))
				continue
			}
			size := int64(len(r.Blob))
			add(acp.ContentBlock{Type: "resource_link", URI: r.URI, Name: linkName("", r.URI), MimeType: r.MIMEType, Size: &size})
			llm = append(llm, fmt.Sprintf("[resource %s, %s, %d bytes]", r.URI, r.MIMEType, size))
		default:
			// Sampling-only blocks (tool_use, tool_result) and types newer
			// than acpd are not valid in a tool result as acpd knows it;
			// show them as JSON rather than dropping them.
			if len(c.raw) > 0 {
				var compact bytes.Buffer
				if json.Compact(&compact, c.raw) == nil {
					add(acp.TextBlock(compact.String()))
					llm = append(llm, compact.String())
				}
			}
		}
	}
	if len(res.Content) == 0 && res.StructuredContent != nil {
		if b, err := json.Marshal(res.StructuredContent); err == nil {
			add(acp.TextBlock(string(b)))
			llm = append(llm, string(b))
		}
	}
	return truncate(strings.Join(llm, "\n"), maxBytes), out
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
