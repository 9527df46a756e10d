package tools

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/acpd/acpd/acp"
	"github.com/acpd/acpd/session/display"
)

// NameAskUserQuestion is the tool that asks the user through the editor.
const NameAskUserQuestion = "ask_user_question"

// ask_user_question takes qwen-code's shape (questions, each with a header,
// choices and multiSelect) and asks through ACP's elicitation/create in form
// mode: one form field per question. The session offers it to the model
// only when the client advertised elicitation.form (CanAsk).
//
// Decisions where the reference and ACP are silent:
//   - Choices are optional (the reference requires 2–4): a question without
//     them is a free-text field. One choice is refused: it is no choice.
//   - A declined or dismissed form is an ordinary result that says so, so
//     the model carries on without the answer; it is never an error and
//     never holds the turn. session/cancel cancels the request
//     ($/cancel_request) and the turn ends cancelled.
//   - The answer given for a choice question is checked against its
//     choices; an answer that is not one of them is passed on marked as
//     such rather than dropped (the user chose to type it).
var askUserQuestionSpec = mustSpec(NameAskUserQuestion, acp.KindOther,
	"Asks the user one to four questions and waits for the answers, shown as a form in the editor. Use it when "+
		"a decision is the user's to make (a preference, an ambiguous requirement, a choice between approaches) and "+
		"guessing would waste work; do not use it for what you can find out yourself. Give each question a short "+
		"header and, where the answer is one of a few, 2-4 options (put a recommended option first); set multiSelect "+
		"when several options may be chosen. Works in plan mode.",
	`{
  "type": "object",
  "properties": {
    "questions": {
      "type": "array",
      "description": "The questions to ask (1-4)",
      "minItems": 1,
      "maxItems": 4,
      "items": {
        "type": "object",
        "properties": {
          "question": {"type": "string", "minLength": 1, "description": "The complete question, ending with a question mark"},
          "header": {"type": "string", "minLength": 1, "maxLength": 40, "description": "A very short label for the question (e.g. \"Database\")"},
          "options": {
            "type": "array",
            "description": "The choices (2-4); leave out for a free-text answer",
            "maxItems": 4,
            "items": {
              "type": "object",
              "properties": {
                "label": {"type": "string", "minLength": 1, "description": "The choice, in 1-5 words"},
                "description": {"type": "string", "description": "What choosing it means"}
              },
              "required": ["label"]
            }
          },
          "multiSelect": {"type": "boolean", "description": "Whether several options may be chosen"}
        },
        "required": ["question", "header"]
      }
    }
  },
  "required": ["questions"]
}`)

// CanAsk reports whether ask_user_question can reach the user through
// client: it serves elicitation/create and caps advertise form mode.
func CanAsk(client acp.Client, caps acp.ClientCapabilities) bool {
	_, ok := client.(acp.Elicitor)
	return ok && caps.ElicitForm()
}

// AsksUser reports whether t is ask_user_question, which a session offers
// only when CanAsk.
func AsksUser(t Tool) bool {
	_, ok := t.(*askUserQuestionTool)
	return ok
}

type askUserQuestionTool struct{ toolSpec }

type askOption struct {
	Label       string `json:"label"`
	Description string `json:"description"`
}

type askQuestion struct {
	Question    string      `json:"question"`
	Header      string      `json:"header"`
	Options     []askOption `json:"options"`
	MultiSelect bool        `json:"multiSelect"`
}

func (t *askUserQuestionTool) Build(env *Env, args json.RawMessage) (Call, error) {
	var a struct {
		Questions []askQuestion `json:"questions"`
	}
	if err := t.decode(args, &a); err != nil {
		return nil, err
	}
	for i, q := range a.Questions {
		if len(q.Options) == 1 {
			return nil, fmt.Errorf("invalid parameters for %s: params/questions/%d/options: give 2-4 options, or none for a free-text answer", NameAskUserQuestion, i)
		}
		if q.MultiSelect && len(q.Options) == 0 {
			return nil, fmt.Errorf("invalid parameters for %s: params/questions/%d/multiSelect: a multi-select question needs options", NameAskUserQuestion, i)
		}
		seen := map[string]bool{}
		for j, o := range q.Options {
			if seen[o.Label] {
				return nil, fmt.Errorf("invalid parameters for %s: params/questions/%d/options/%d/label: duplicate label %q", NameAskUserQuestion, i, j, o.Label)
			}
			seen[o.Label] = true
		}
	}
	return &askUserQuestionCall{questions: a.Questions}, nil
}

type askUserQuestionCall struct{ questions []askQuestion }

func (c *askUserQuestionCall) Title() string {
	if len(c.questions) == 1 {
		return "Ask: " + c.questions[0].Question
	}
	return fmt.Sprintf("Ask %d questions", len(c.questions))
}
func (c *askUserQuestionCall) Locations() []acp.ToolCallLocation { return nil }

// Confirmation is none: the question is itself the user's to answer, in
// every approval mode, plan mode included.
func (c *askUserQuestionCall) Confirmation() Confirmation { return Confirmation{Kind: ConfirmNone} }

// field is the form field of question i.
func field(i int) string { return fmt.Sprintf("answer_%d", i+1) }

// Request is the elicitation/create the call sends.
func (c *askUserQuestionCall) Request(sessionID, toolCallID string) *acp.CreateElicitationRequest {
	props := map[string]acp.ElicitationProperty{}
	var required []string
	for i, q := range c.questions {
		// The questions are the model's text, shown in the editor's form:
		// their control and bidi characters escaped (the answer values,
		// Const, stay exact).
		p := acp.ElicitationProperty{Type: "string", Title: display.Line(q.Header), Description: display.Text(q.Question)}
		var opts []acp.EnumOption
		for _, o := range q.Options {
			opts = append(opts, acp.EnumOption{Const: o.Label, Title: display.Line(o.Label), Description: display.Text(o.Description)})
		}
		switch {
		case q.MultiSelect:
			one := 1
			p.Type, p.Items, p.MinItems = "array", &acp.ElicitationItems{AnyOf: opts}, &one
		case len(opts) > 0:
			p.OneOf = opts
		}
		props[field(i)] = p
		required = append(required, field(i))
	}
	msg := fmt.Sprintf("The agent has %d questions for you.", len(c.questions))
	if len(c.questions) == 1 {
		msg = display.Text(c.questions[0].Question)
	}
	return &acp.CreateElicitationRequest{
		SessionID: sessionID, ToolCallID: toolCallID, Mode: "form", Message: msg,
		RequestedSchema: acp.ElicitationSchema{Type: "object", Properties: props, Required: required},
	}
}

func (c *askUserQuestionCall) Execute(ctx context.Context, env *Env) Result {
	el, ok := env.Client.(acp.Elicitor)
	if !ok || !env.Caps.ElicitForm() {
		return failure(ErrTypeExecutionFailed, errors.New("nobody can be asked: the client does not support elicitation forms; decide yourself and say what you assumed"))
	}
	resp, err := el.CreateElicitation(ctx, c.Request(env.SessionID, env.ToolCallID))
	switch {
	case ctx.Err() != nil:
		return failure(ErrTypeCancelled, errors.New("the question was cancelled"))
	case err != nil:
		return failure(ErrTypeExecutionFailed, fmt.Errorf("the question could not be asked: %v", err))
	}
	var text string
	switch resp.Action {
	case acp.ElicitAccept:
		text = c.answers(resp.Content)
	case acp.ElicitDecline:
		text = "The user declined to answer. Go on without the answer (say what you assumed), or stop if it is essential."
	default:
		text = "The user dismissed the question without answering. Go on without the answer (say what you assumed), or stop if it is essential."
	}
	return Result{LLMContent: text, Content: []acp.ToolCallContent{acp.TextContent(text)}, RawOutput: map[string]any{"action": resp.Action}}
}

// answers is the model's text for an accepted form.
func (c *askUserQuestionCall) answers(content map[string]json.RawMessage) string {
	var b strings.Builder
	b.WriteString("The user answered:\n")
	for i, q := range c.questions {
		fmt.Fprintf(&b, "%d. %s\n   Answer: %s\n", i+1, q.Question, answerText(q, content[field(i)]))
	}
	return b.String()
}

// answerText renders one field's value; values outside the choices are
// marked as the user's own.
func answerText(q askQuestion, raw json.RawMessage) string {
	if len(raw) == 0 || string(raw) == "null" {
		return "(no answer)"
	}
	known := map[string]bool{}
	for _, o := range q.Options {
		known[o.Label] = true
	}
	mark := func(s string) string {
		if len(q.Options) > 0 && !known[s] {
			return s + " (the user's own answer, not one of the options)"
		}
		return s
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		if strings.TrimSpace(s) == "" {
			return "(no answer)"
		}
		return mark(s)
	}
	var list []string
	if json.Unmarshal(raw, &list) == nil {
		if len(list) == 0 {
			return "(none chosen)"
		}
		for i := range list {
			list[i] = mark(list[i])
		}
		return strings.Join(list, ", ")
	}
	return string(raw) // a number or boolean, as the client sent it
}
