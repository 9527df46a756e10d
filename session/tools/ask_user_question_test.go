package tools

import (
	"context"
	"encoding/json"
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/acpd/acpd/acp"
	"github.com/acpd/acpd/acp/acptest"
)

// elicitClient answers elicitation/create with answer (or err).
type elicitClient struct {
	fakeClient
	got    []*acp.CreateElicitationRequest
	answer *acp.CreateElicitationResponse
	err    error
}

func (c *elicitClient) CreateElicitation(ctx context.Context, req *acp.CreateElicitationRequest) (*acp.CreateElicitationResponse, error) {
	c.got = append(c.got, req)
	if c.err != nil {
		return nil, c.err
	}
	return c.answer, nil
}

var formCaps = acp.ClientCapabilities{Elicitation: &acp.ElicitationCapabilities{Form: &acp.Capability{}}}

var twoQuestions = map[string]any{"questions": []any{
	map[string]any{"question": "Which database should the service use?", "header": "Database",
		"options": []any{map[string]any{"label": "Postgres", "description": "the team knows it"}, map[string]any{"label": "SQLite"}}},
	map[string]any{"question": "Which checks should run?", "header": "Checks", "multiSelect": true,
		"options": []any{map[string]any{"label": "lint"}, map[string]any{"label": "test"}, map[string]any{"label": "race"}}},
	map[string]any{"question": "Anything else?", "header": "Notes"},
}}

func TestAskUserQuestion_AsksAFormAndReturnsTheAnswers(t *testing.T) {
	c := &elicitClient{answer: &acp.CreateElicitationResponse{Action: acp.ElicitAccept, Content: map[string]json.RawMessage{
		"answer_1": json.RawMessage(`"Postgres"`), "answer_2": json.RawMessage(`["lint","race"]`), "answer_3": json.RawMessage(`"keep it small"`),
	}}}
	env := &Env{SessionID: "s1", ToolCallID: "call_q", Client: c, Caps: formCaps}
	call, res := run(t, t.Context(), env, NameAskUserQuestion, twoQuestions)
	require.NoError(t, res.Err)
	assert.Equal(t, ConfirmNone, call.Confirmation().Kind, "no permission to ask, plan mode included")
	assert.Equal(t, "The user answered:\n"+
		"1. Which database should the service use?\n   Answer: Postgres\n"+
		"2. Which checks should run?\n   Answer: lint, race\n"+
		"3. Anything else?\n   Answer: keep it small\n", res.LLMContent)

	require.Len(t, c.got, 1)
	req := c.got[0]
	assert.Equal(t, "s1", req.SessionID)
	assert.Equal(t, "call_q", req.ToolCallID)
	assert.Equal(t, "form", req.Mode)
	b, err := json.Marshal(req)
	require.NoError(t, err)
	v, err := acptest.DefaultValidator()
	require.NoError(t, err)
	require.NoError(t, v.ValidateDef("CreateElicitationRequest", b), "%s", b)
	assert.JSONEq(t, `{"sessionId":"s1","toolCallId":"call_q","mode":"form","message":"The agent has 3 questions for you.",
		"requestedSchema":{"type":"object","required":["answer_1","answer_2","answer_3"],"properties":{
		"answer_1":{"type":"string","title":"Database","description":"Which database should the service use?",
			"oneOf":[{"const":"Postgres","title":"Postgres","description":"the team knows it"},{"const":"SQLite","title":"SQLite"}]},
		"answer_2":{"type":"array","title":"Checks","description":"Which checks should run?","minItems":1,
			"items":{"anyOf":[{"const":"lint","title":"lint"},{"const":"test","title":"test"},{"const":"race","title":"race"}]}},
		"answer_3":{"type":"string","title":"Notes","description":"Anything else?"}}}}`, string(b))
}

func TestAskUserQuestion_DeclineCancelAndErrorsAreCleanResults(t *testing.T) {
	one := map[string]any{"questions": []any{map[string]any{"question": "Go on?", "header": "Go"}}}
	for action, want := range map[string]string{
		acp.ElicitDecline: "The user declined to answer.",
		acp.ElicitCancel:  "The user dismissed the question without answering.",
	} {
		c := &elicitClient{answer: &acp.CreateElicitationResponse{Action: action}}
		_, res := run(t, t.Context(), &Env{SessionID: "s", Client: c, Caps: formCaps}, NameAskUserQuestion, one)
		require.NoError(t, res.Err, action)
		assert.Contains(t, res.LLMContent, want)
		assert.Equal(t, "Go on?", c.got[0].Message, "one question is the message")
	}
	c := &elicitClient{err: errors.New("no answers left")}
	_, res := run(t, t.Context(), &Env{SessionID: "s", Client: c, Caps: formCaps}, NameAskUserQuestion, one)
	require.Error(t, res.Err)
	assert.Contains(t, res.LLMContent, "the question could not be asked: no answers left")

	// A client without form elicitation is not asked.
	c = &elicitClient{}
	_, res = run(t, t.Context(), &Env{SessionID: "s", Client: c}, NameAskUserQuestion, one)
	require.Error(t, res.Err)
	assert.Empty(t, c.got)
	assert.False(t, CanAsk(c, acp.ClientCapabilities{}))
	assert.True(t, CanAsk(c, formCaps))
	assert.False(t, CanAsk(&fakeClient{}, formCaps), "a client that cannot send elicitation/create")
}

func TestAskUserQuestion_AnswersOutsideTheOptionsAreMarked(t *testing.T) {
	c := &elicitClient{answer: &acp.CreateElicitationResponse{Action: acp.ElicitAccept, Content: map[string]json.RawMessage{
		"answer_1": json.RawMessage(`"MySQL"`), "answer_2": json.RawMessage(`[]`),
	}}}
	_, res := run(t, t.Context(), &Env{SessionID: "s", Client: c, Caps: formCaps}, NameAskUserQuestion, twoQuestions)
	assert.Contains(t, res.LLMContent, "Answer: MySQL (the user's own answer, not one of the options)")
	assert.Contains(t, res.LLMContent, "2. Which checks should run?\n   Answer: (none chosen)")
	assert.Contains(t, res.LLMContent, "3. Anything else?\n   Answer: (no answer)")
}

func TestAskUserQuestion_BadArguments(t *testing.T) {
	tl := tool(t, NameAskUserQuestion)
	for name, a := range map[string]map[string]any{
		"no questions":     {"questions": []any{}},
		"five questions":   {"questions": []any{q(), q(), q(), q(), q()}},
		"one option":       {"questions": []any{map[string]any{"question": "x?", "header": "x", "options": []any{map[string]any{"label": "a"}}}}},
		"multi no options": {"questions": []any{map[string]any{"question": "x?", "header": "x", "multiSelect": true}}},
		"duplicate labels": {"questions": []any{map[string]any{"question": "x?", "header": "x", "options": []any{map[string]any{"label": "a"}, map[string]any{"label": "a"}}}}},
		"no header":        {"questions": []any{map[string]any{"question": "x?"}}},
	} {
		_, err := tl.Build(&Env{}, args(t, a))
		assert.Error(t, err, name)
	}
}

func q() map[string]any { return map[string]any{"question": "x?", "header": "x"} }
