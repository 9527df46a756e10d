package mcp

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"slices"
	"strings"
	"unicode"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/acpd/acpd/acp"
)

// Prompts as slash commands. Decisions:
//   - Each prompt is the command mcp__<server>__<prompt> (typed as
//     /mcp__<server>__<prompt>), named as tools are: characters outside
//     [A-Za-z0-9_-] become '_'. Its description is the prompt's (or its
//     title), and its input hint names the arguments: the first as <name>
//     ([name] when optional), the others as name=… ([name=…] when
//     optional).
//   - The text after the command fills the first argument; name=value
//     words fill the others (and may fill the first too, then no other
//     text may be given). A value with spaces is quoted right after the
//     '=': name="two words" or name='two words'. A word of the form
//     name=value whose name is not an argument of the prompt is ordinary
//     text, and the free text is kept as typed (line breaks, quotes).
//   - A missing required argument is answered with the usage, and the
//     model is not called.
//   - The prompt's messages are sent as the user's message, in order: text
//     as text, images as images, embedded resources as resources (a binary
//     one, not an image, by a line naming it), resource links as links
//     (read through the server when they name one of its resources, as an
//     @-mention is), audio by a line naming it (acpd takes no audio). A
//     message of the assistant role is sent as text marked "Assistant:",
//     since the conversation cannot hold a turn the model did not take.

// Prompt is one server prompt offered as a slash command.
type Prompt struct {
	// Command is the command's name, without the slash.
	Command     string
	Server      string
	Name        string
	Description string
	// Hint names the arguments (the command's input hint); "" when the
	// prompt takes none.
	Hint string

	srv *server
	def *sdk.Prompt
}

// Prompts returns every connected server's prompts, in server order then
// the server's listing order, each command name once (a later duplicate
// after sanitising is left out).
func (st *Set) Prompts() []Prompt {
	if st == nil {
		return nil
	}
	var out []Prompt
	seen := map[string]bool{}
	for _, s := range st.list() {
		s.mu.Lock()
		defs := s.lists.prompts
		live := s.conn != nil || s.dead != nil
		s.mu.Unlock()
		if !live {
			continue
		}
		for _, p := range defs {
			name := "mcp__" + sanitize(s.name) + "__" + sanitize(p.Name)
			if seen[name] {
				continue
			}
			seen[name] = true
			desc := p.Description
			if desc == "" {
				desc = p.Title
			}
			if desc == "" {
				desc = fmt.Sprintf("MCP prompt %s of %s", p.Name, s.name)
			}
			out = append(out, Prompt{Command: name, Server: s.name, Name: p.Name, Description: desc, Hint: promptHint(p.Arguments), srv: s, def: p})
		}
	}
	return out
}

// promptHint is the input hint naming a prompt's arguments.
func promptHint(args []*sdk.PromptArgument) string {
	var parts []string
	for i, a := range args {
		if a == nil {
			continue
		}
		var p string
		switch {
		case i == 0 && a.Required:
			p = "<" + a.Name + ">"
		case i == 0:
			p = "[" + a.Name + "]"
		case a.Required:
			p = a.Name + "=…"
		default:
			p = "[" + a.Name + "=…]"
		}
		parts = append(parts, p)
	}
	return strings.Join(parts, " ")
}

// UsageError is a prompt's arguments not matching what it takes; its text
// is the answer for the user.
type UsageError struct{ Msg string }

func (e *UsageError) Error() string { return e.Msg }

// Expand gets the prompt from its server with the arguments parsed from
// text and returns its messages as the content of the user's message. A
// *UsageError says what the arguments lack.
func (p Prompt) Expand(ctx context.Context, text string) ([]acp.ContentBlock, error) {
	args, err := promptArgs(text, p.def.Arguments)
	if err != nil {
		usage := "/" + p.Command
		if p.Hint != "" {
			usage += " " + p.Hint
		}
		return nil, &UsageError{Msg: fmt.Sprintf("%v. Usage: %s", err, usage)}
	}
	s := p.srv
	c, err := s.session(ctx)
	if err != nil {
		return nil, err
	}
	var res *sdk.GetPromptResult
	err = s.do(ctx, c, func(ctx context.Context) error {
		var err error
		res, err = c.cs.GetPrompt(ctx, &sdk.GetPromptParams{Name: p.Name, Arguments: args})
		return err
	})
	if err != nil {
		return nil, err
	}
	var out []acp.ContentBlock
	for _, m := range res.Messages {
		if m == nil || m.Content == nil {
			continue
		}
		b, ok := promptBlock(m.Content)
		if !ok {
			continue
		}
		if m.Role == "assistant" {
			if b.Type == "text" {
				b.Text = "Assistant: " + b.Text
			} else {
				out = append(out, acp.TextBlock("Assistant:"))
			}
		}
		out = append(out, b)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("mcp server %q: prompt %q has no messages", s.name, p.Name)
	}
	return out, nil
}

// promptBlock is a prompt message's content as a prompt block acpd takes.
func promptBlock(c sdk.Content) (acp.ContentBlock, bool) {
	switch c := c.(type) {
	case *sdk.TextContent:
		return acp.TextBlock(c.Text), true
	case *sdk.ImageContent:
		return acp.ContentBlock{Type: "image", MimeType: c.MIMEType, Data: base64.StdEncoding.EncodeToString(c.Data)}, true
	case *sdk.AudioContent:
		return acp.TextBlock(fmt.Sprintf("[audio %s, %d bytes, not shown]", c.MIMEType, len(c.Data))), true
	case *sdk.ResourceLink:
		return acp.ContentBlock{Type: "resource_link", URI: c.URI, Name: linkName(c.Name, c.URI), Title: c.Title,
			Description: c.Description, MimeType: c.MIMEType, Size: c.Size}, true
	case *sdk.EmbeddedResource:
		if c.Resource == nil {
			return acp.ContentBlock{}, false
		}
		return contentsBlock(c.Resource), true
	}
	return acp.ContentBlock{}, false
}

// contentsBlock is resource contents as a prompt block: text as an
// embedded resource, an image as an image, other binary contents as a
// line naming them.
func contentsBlock(r *sdk.ResourceContents) acp.ContentBlock {
	if r.Blob == nil {
		text := r.Text
		return acp.ContentBlock{Type: "resource", Resource: &acp.EmbeddedResource{URI: r.URI, MimeType: r.MIMEType, Text: &text}}
	}
	if strings.HasPrefix(r.MIMEType, "image/") {
		return acp.ContentBlock{Type: "image", MimeType: r.MIMEType, Data: base64.StdEncoding.EncodeToString(r.Blob), URI: r.URI}
	}
	return acp.TextBlock(resourceText(r))
}

// promptArgs parses a prompt command's text (see the decisions above).
// The free text is kept as typed, line breaks included; only the
// name=value words are taken out of it.
func promptArgs(text string, defs []*sdk.PromptArgument) (map[string]string, error) {
	var names []string
	for _, a := range defs {
		if a != nil {
			names = append(names, a.Name)
		}
	}
	words, err := splitWords(text)
	if err != nil {
		return nil, err
	}
	args := map[string]string{}
	var free strings.Builder
	last := 0
	for _, w := range words {
		name, value, ok := strings.Cut(w.text, "=")
		if !ok || !slices.Contains(names, name) {
			continue
		}
		if _, dup := args[name]; dup {
			return nil, fmt.Errorf("argument %q is given twice", name)
		}
		args[name] = value
		free.WriteString(text[last:w.start])
		last = w.end
	}
	free.WriteString(text[last:])
	if rest := strings.TrimSpace(free.String()); rest != "" {
		if len(names) == 0 {
			return nil, errors.New("this prompt takes no arguments")
		}
		if _, dup := args[names[0]]; dup {
			return nil, fmt.Errorf("argument %q is given twice (by name and as the text after the command)", names[0])
		}
		args[names[0]] = rest
	}
	var missing []string
	for _, a := range defs {
		if a != nil && a.Required && args[a.Name] == "" {
			missing = append(missing, a.Name)
		}
	}
	if len(missing) > 0 {
		return nil, fmt.Errorf("missing required argument %s", strings.Join(missing, ", "))
	}
	return args, nil
}

// word is one word of a command's text: text with the quotes of a
// quoted value removed, at text[start:end].
type word struct {
	text       string
	start, end int
}

// splitWords splits text at white space, except inside a value quoted
// right after '=' (name="two words" or name='two words'): the free text
// keeps its apostrophes and quotes as typed.
func splitWords(text string) ([]word, error) {
	var out []word
	var cur strings.Builder
	var quote rune
	start := -1
	var prev rune
	flush := func(end int) {
		if start >= 0 {
			out = append(out, word{text: cur.String(), start: start, end: end})
		}
		cur.Reset()
		start = -1
	}
	for i, r := range text {
		switch {
		case quote != 0:
			if r == quote {
				quote = 0
			} else {
				cur.WriteRune(r)
			}
		case unicode.IsSpace(r):
			flush(i)
		case (r == '"' || r == '\'') && prev == '=' && start >= 0:
			quote = r
		default:
			if start < 0 {
				start = i
			}
			cur.WriteRune(r)
		}
		prev = r
	}
	if quote != 0 {
		return nil, fmt.Errorf("a %c quote is not closed", quote)
	}
	flush(len(text))
	return out, nil
}
