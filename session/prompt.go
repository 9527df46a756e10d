package session

import (
	"fmt"
	"strings"

	"github.com/acpd/acpd/acp"
	"github.com/acpd/acpd/session/model"
)

// userMessage turns the ACP prompt into the model's user message. Text is
// kept as is; a resource link becomes a mention the tools can follow; an
// embedded text resource is inlined with its URI; images travel as images.
// Audio and blob resources are refused: acpd does not advertise them.
func (s *Session) userMessage(blocks []acp.ContentBlock) (model.Message, error) {
	if len(blocks) == 0 {
		return model.Message{}, acp.ErrInvalidParams("prompt", "prompt must hold at least one content block")
	}
	var parts []string
	msg := model.Message{Role: model.RoleUser}
	for i, b := range blocks {
		field := fmt.Sprintf("prompt[%d]", i)
		switch b.Type {
		case "text":
			parts = append(parts, b.Text)
		case "resource_link":
			if b.URI == "" {
				return model.Message{}, acp.ErrInvalidParams(field+".uri", "resource_link needs a uri")
			}
			name := b.Name
			if name == "" {
				name = b.URI
			}
			parts = append(parts, fmt.Sprintf("[@%s](%s)", name, b.URI))
		case "resource":
			r := b.Resource
			if r == nil {
				return model.Message{}, acp.ErrInvalidParams(field+".resource", "resource block needs a resource")
			}
			if r.Text == nil {
				return model.Message{}, acp.ErrInvalidParams(field+".resource", "binary embedded resources are not supported")
			}
			parts = append(parts, fmt.Sprintf("<context uri=%q>\n%s\n</context>", r.URI, *r.Text))
		case "image":
			if b.Data == "" || b.MimeType == "" {
				return model.Message{}, acp.ErrInvalidParams(field, "image block needs data and mimeType")
			}
			msg.Images = append(msg.Images, model.Image{MimeType: b.MimeType, Data: b.Data})
		case "audio":
			return model.Message{}, acp.ErrInvalidParams(field, "audio prompts are not supported (promptCapabilities.audio is false)")
		default:
			return model.Message{}, acp.ErrInvalidParams(field+".type", fmt.Sprintf("unknown content block type %q", b.Type))
		}
	}
	msg.Content = strings.Join(parts, "\n")
	return msg, nil
}
