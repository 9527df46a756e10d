package headless

import (
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/sourcegraph/jsonrpc2"

	"github.com/acpd/acpd/acp"
)

// answers are the --answer flags of a run: acpd run cannot ask anyone, so
// the model's questions (ask_user_question, through elicitation/create) are
// answered from them, one per question, in the order they are asked.
//
// Decisions: a choice question takes an option's label (any case) or its
// number (1 for the first); a multi-select one a comma-separated list of
// those; anything else is passed on as the user's own words. When the
// answers run out the question fails with an error that says to pass
// --answer, so the model is told, and the run's stderr says it too: a
// headless run never waits for input.
type answers struct {
	mu   sync.Mutex
	left []string
}

// Elicit answers an elicitation/create from the --answer flags.
func (o *Output) Elicit(params json.RawMessage) (*acp.CreateElicitationResponse, *jsonrpc2.Error) {
	var req acp.CreateElicitationRequest
	if err := json.Unmarshal(params, &req); err != nil || req.Mode != "form" {
		return nil, &jsonrpc2.Error{Code: acp.CodeInvalidParams, Message: "acpd run answers only form elicitations"}
	}
	if req.Meta["source"] == "mcp" {
		// An MCP server's question is the user's to answer, not the
		// --answer flags' (they answer the model): declined, and said so.
		o.mu.Lock()
		o.breakLine()
		fmt.Fprintf(o.stderr, "acpd run: declined a question from MCP server %v, since a headless run cannot ask the user: %s\n", req.Meta["server"], req.Message)
		o.mu.Unlock()
		return &acp.CreateElicitationResponse{Action: acp.ElicitDecline}, nil
	}
	fields := fieldOrder(req.RequestedSchema)
	content := map[string]json.RawMessage{}
	o.answers.mu.Lock()
	defer o.answers.mu.Unlock()
	for _, name := range fields {
		p := req.RequestedSchema.Properties[name]
		label := p.Description
		if label == "" {
			label = p.Title
		}
		if len(o.answers.left) == 0 {
			msg := fmt.Sprintf("acpd run is not interactive and no --answer is left for the question %q: pass one --answer per question the model asks, in order", label)
			o.mu.Lock()
			o.breakLine()
			fmt.Fprintf(o.stderr, "acpd run: %s\n", msg)
			o.mu.Unlock()
			return nil, &jsonrpc2.Error{Code: acp.CodeInternalError, Message: msg}
		}
		a := o.answers.left[0]
		o.answers.left = o.answers.left[1:]
		v := answerValue(p, a)
		b, _ := json.Marshal(v)
		content[name] = b
		o.mu.Lock()
		o.breakLine()
		fmt.Fprintf(o.stderr, "acpd run: answered %q with %s (--answer)\n", label, b)
		o.mu.Unlock()
	}
	return &acp.CreateElicitationResponse{Action: acp.ElicitAccept, Content: content}, nil
}

// fieldOrder is the schema's fields, the required ones in their order
// first, then the others by name.
func fieldOrder(s acp.ElicitationSchema) []string {
	var out []string
	for _, n := range s.Required {
		if _, ok := s.Properties[n]; ok && !slices.Contains(out, n) {
			out = append(out, n)
		}
	}
	var rest []string
	for n := range s.Properties {
		if !slices.Contains(out, n) {
			rest = append(rest, n)
		}
	}
	slices.Sort(rest)
	return append(out, rest...)
}

// answerValue maps one --answer to a field's value.
func answerValue(p acp.ElicitationProperty, a string) any {
	if p.Type == "array" {
		var opts []acp.EnumOption
		if p.Items != nil {
			opts = p.Items.AnyOf
		}
		out := []string{}
		for part := range strings.SplitSeq(a, ",") {
			if part = strings.TrimSpace(part); part != "" {
				out = append(out, choice(opts, part))
			}
		}
		return out
	}
	return choice(p.OneOf, a)
}

// choice is the option a names (by label or number), else a itself.
func choice(opts []acp.EnumOption, a string) string {
	if n, err := strconv.Atoi(strings.TrimSpace(a)); err == nil && n >= 1 && n <= len(opts) {
		return opts[n-1].Const
	}
	for _, o := range opts {
		if strings.EqualFold(strings.TrimSpace(a), o.Const) || strings.EqualFold(strings.TrimSpace(a), o.Title) {
			return o.Const
		}
	}
	return a
}
