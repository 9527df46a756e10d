package contextmgr

import (
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"sync"

	"github.com/acpd/acpd/session/model"
	"github.com/acpd/acpd/session/tokens"
)

// SummaryPrompt is the system prompt of a summary request. Its sections are
// the nine of the reference's state snapshot (agent-features.md §1.7); the
// wording is acpd's.
const SummaryPrompt = `You are the summariser of a coding agent's conversation. The conversation so far is too long for the model's context window; your output replaces its older part and becomes the agent's only memory of it, so leave out nothing the agent needs to carry on the work.

First think in an <analysis> block (it is discarded). Then write a <state_snapshot> element with these child elements, in this order:
<primary_request_and_intent> what the user asked for, in detail, including every explicit requirement
<key_technical_concepts> technologies, conventions and constraints that matter
<files_and_code_sections> files read, changed or created, why they matter, and the exact snippets that will be needed again
<errors_and_fixes> errors met and how they were fixed, including what the user said about them
<problem_solving> problems solved and investigations still open
<all_user_messages> every message the user wrote (not tool results), briefly
<pending_tasks> tasks asked for and not yet done
<current_work> precisely what was being worked on right before this summary
<next_step> the next step, directly in line with the most recent request; quote the request where it helps
Write every element, even one with nothing to say ("none"). Write plain, dense text inside each element. Do not call tools.`

// SnapshotSections are the child elements of a state snapshot, in order.
var SnapshotSections = []string{
	"primary_request_and_intent", "key_technical_concepts", "files_and_code_sections", "errors_and_fixes",
	"problem_solving", "all_user_messages", "pending_tasks", "current_work", "next_step",
}

// InlineDirective is the last user message of a summary request that
// re-sends the conversation as it was (the reference's cache-sharing path,
// agent-features.md §1.7): the system prompt and tools stay the session's,
// so the provider serves the conversation from its prompt cache, and this
// message asks for the snapshot instead of the next step.
func InlineDirective(focus string) string {
	return SummaryPrompt + focusText(focus) +
		"\n\nDo not call tools; tool execution is disabled for this request.\n\n" + SummaryDirective
}

// focusText is /compress's extra instructions as appended to the prompt.
func focusText(focus string) string {
	if focus = strings.TrimSpace(focus); focus != "" {
		if len(focus) > 2000 {
			focus = focus[:2000]
		}
		return "\n\nAdditional Instructions:\n" + focus
	}
	return ""
}

// SummaryDirective ends the summary request's input.
const SummaryDirective = "First, reason in your <analysis> block. Then, produce the <state_snapshot> XML."

// maxRenderedResult bounds one tool result in the summary's input.
const maxRenderedResult = 4000

// SummaryRequest is the request that asks the model (the session's, or
// model.compactionModel) for a state snapshot of msgs. focus is extra
// instructions from /compress; inputBudget bounds the input in tokens: the
// oldest messages that do not fit are left out (a summary of an earlier
// compaction, at the start, always stays).
func SummaryRequest(modelID string, msgs []model.Message, focus string, inputBudget, maxTokens int) model.Request {
	system := SummaryPrompt + focusText(focus)
	parts := make([]string, len(msgs))
	for i := range msgs {
		parts[i] = render(&msgs[i])
	}
	// 200: the fixed texts around the parts.
	budget := max(inputBudget, 1024)*tokens.BytesPerToken - len(system) - len(SummaryDirective) - 200
	// Keep the newest parts that fit, and a leading earlier summary.
	var keepFirst string
	if len(parts) > 0 && strings.Contains(parts[0], SummaryIntro[:40]) {
		keepFirst, parts = parts[0], parts[1:]
		budget -= len(keepFirst)
	}
	start, size := len(parts), 0
	for start > 0 && size+len(parts[start-1]) <= budget {
		start--
		size += len(parts[start])
	}
	var b strings.Builder
	b.WriteString("Here is the conversation to summarise.\n\n")
	if keepFirst != "" {
		b.WriteString(keepFirst)
	}
	if start > 0 {
		b.WriteString("[… earlier messages left out: they did not fit the summariser's window …]\n\n")
	}
	for _, p := range parts[start:] {
		b.WriteString(p)
	}
	b.WriteString("\n")
	b.WriteString(SummaryDirective)
	return model.Request{
		Model:     modelID,
		System:    system,
		Messages:  []model.Message{{Role: model.RoleUser, Content: b.String()}},
		MaxTokens: maxTokens,
	}
}

// render is one message as summary input text; images become placeholders.
func render(m *model.Message) string {
	var b strings.Builder
	switch m.Role {
	case model.RoleUser:
		b.WriteString("### User\n")
		b.WriteString(m.Content)
		for _, img := range m.Images {
			b.WriteString("\n[image: " + img.MimeType + "]")
		}
	case model.RoleAssistant:
		b.WriteString("### Assistant\n")
		b.WriteString(m.Content)
		for _, c := range m.ToolCalls {
			b.WriteString("\n[tool call " + c.Name + " " + string(c.Arguments) + "]")
		}
	case model.RoleTool:
		b.WriteString("### Tool result (" + m.Name + ")\n")
		c := m.Content
		if len(c) > maxRenderedResult {
			c = c[:maxRenderedResult/2] + "\n[… " + strconv.Itoa(len(c)-maxRenderedResult) + " characters left out …]\n" + c[len(c)-maxRenderedResult/2:]
		}
		b.WriteString(c)
	default:
		b.WriteString("### " + string(m.Role) + "\n" + m.Content)
	}
	b.WriteString("\n\n")
	return b.String()
}

var (
	analysisRe = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`(?s)<analysis>.*?(</analysis>|$)`) })
	snapshotRe = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`(?s)<state_snapshot>.*?</state_snapshot>`) })
)

// ExtractSummary is the summary in a summariser's answer: the
// <state_snapshot> element when there is one, else the answer without its
// <analysis> block; "" when nothing is left.
func ExtractSummary(answer string) string {
	if s := snapshotRe().FindString(answer); s != "" {
		inner := strings.TrimSpace(strings.TrimSuffix(strings.TrimPrefix(s, "<state_snapshot>"), "</state_snapshot>"))
		if inner == "" {
			return ""
		}
		return s
	}
	return strings.TrimSpace(analysisRe().ReplaceAllString(answer, ""))
}

// ErrNotASnapshot is a summariser's answer that is not the state snapshot
// asked for: a refusal, chatter, or a snapshot missing its sections.
var ErrNotASnapshot = errors.New("the summary is not the state snapshot asked for")

// ValidateSummary accepts a summariser's answer only when it is the
// structured snapshot asked for: a closed <state_snapshot> element holding
// every section of SnapshotSections. Anything else — "I'm sorry, but I
// cannot help with that request.", a free-text recap, a snapshot cut short
// — would become the agent's only memory of the conversation, so it counts
// as a failed summary and the fallback applies.
func ValidateSummary(answer string) (string, error) {
	summary := ExtractSummary(answer)
	if summary == "" {
		return "", ErrEmptySummary
	}
	if !strings.HasPrefix(summary, "<state_snapshot>") || !strings.HasSuffix(summary, "</state_snapshot>") {
		return "", fmt.Errorf("%w: no closed <state_snapshot> element", ErrNotASnapshot)
	}
	var missing []string
	for _, sec := range SnapshotSections {
		open := strings.Index(summary, "<"+sec+">")
		if open < 0 || !strings.Contains(summary[open:], "</"+sec+">") {
			missing = append(missing, sec)
		}
	}
	if len(missing) > 0 {
		return "", fmt.Errorf("%w: missing %s", ErrNotASnapshot, strings.Join(missing, ", "))
	}
	return summary, nil
}
