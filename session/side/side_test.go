package side

import (
	"context"
	"errors"
	"iter"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/acpd/acpd/session/model"
)

// The side request repeats the prefix and adds the question without
// writing into the conversation's array, which the running turn appends to.
func TestRequest_LeavesTheConversationAlone(t *testing.T) {
	history := make([]model.Message, 2, 8)
	history[0] = model.Message{Role: model.RoleUser, Content: "task"}
	history[1] = model.Message{Role: model.RoleAssistant, Content: "working"}
	var p Prefix
	select {
	case <-p.Sent():
		t.Fatal("Sent before any request")
	default:
	}
	p.Store(model.Request{Model: "m", Messages: history, Tools: []model.ToolSpec{{Name: "ls"}}, Cache: &model.Cache{}})
	<-p.Sent()
	last, ok := p.Last()
	require.True(t, ok)
	assert.Nil(t, last.Cache, "a side request never touches the conversation's cache")

	req := Request(last, model.Message{Role: model.RoleUser, Content: "why?"})
	history = append(history, model.Message{Role: model.RoleTool, Content: "turn goes on"})
	assert.Equal(t, "turn goes on", history[2].Content)
	require.Len(t, req.Messages, 3)
	assert.Equal(t, "why?", req.Messages[2].Content)
	assert.True(t, req.NoToolUse)
	assert.Equal(t, []model.ToolSpec{{Name: "ls"}}, req.Tools, "the same tools")
	assert.Nil(t, req.Cache)
}

type scripted []model.Event

func (s scripted) Stream(context.Context, model.Request) iter.Seq2[model.Event, error] {
	return func(yield func(model.Event, error) bool) {
		for _, ev := range s {
			if !yield(ev, nil) {
				return
			}
		}
		yield(model.Event{}, errors.New("stream ended"))
	}
}

// Ask shows the text, restarts it after a retry, and counts the calls it
// never runs.
func TestAsk(t *testing.T) {
	var shown []string
	a, err := Ask(t.Context(), scripted{
		{Kind: model.EventText, Text: "lost"},
		{Kind: model.EventRetry, RetryErr: errors.New("cut")},
		{Kind: model.EventReasoning, Text: "hm"},
		{Kind: model.EventText, Text: "the "},
		{Kind: model.EventText, Text: "answer"},
		{Kind: model.EventToolCall, ToolCall: model.ToolCall{Name: "rm"}},
		{Kind: model.EventUsage, Usage: model.Usage{PromptTokens: 7}},
	}, model.Request{}, func(ev model.Event) { shown = append(shown, ev.String()) })
	require.EqualError(t, err, "stream ended")
	assert.Equal(t, "the answer", a.Text)
	assert.Equal(t, 1, a.Calls)
	require.NotNil(t, a.Usage)
	assert.Equal(t, 7, a.Usage.PromptTokens)
	assert.Equal(t, []string{"text:lost", "retry:cut", "reasoning:hm", "text:the ", "text:answer"}, shown)
}
