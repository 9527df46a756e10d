package tokens

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/acpd/acpd/session/model"
)

func TestEstimates(t *testing.T) {
	assert.Equal(t, 0, Text(""))
	assert.Equal(t, 1, Text("abc"))
	assert.Equal(t, 1, Text("abcd"))
	assert.Equal(t, 2, Text("abcde"))
	assert.Equal(t, 0, Bytes(-3))
	assert.Equal(t, 400, ToBytes(100))
	assert.Equal(t, 100, Bytes(ToBytes(100)), "a byte budget holds as many tokens as it was made from")

	assert.Equal(t, Image+MessageOverhead, Message(&model.Message{Role: model.RoleUser, Images: []model.Image{{MimeType: "image/png", Data: "x"}}}))
	call := model.Message{Role: model.RoleAssistant, Content: "ok", Reasoning: "why not",
		ToolCalls: []model.ToolCall{{ID: "c1", Name: "read_file", Arguments: json.RawMessage(`{"a":1}`)}}}
	// content 2 + reasoning 7 + id 2 + name 9 + args 7 = 27 bytes → 7 tokens.
	assert.Equal(t, MessageOverhead+CallOverhead+7, Message(&call))
	answer := model.Message{Role: model.RoleAssistant, Content: "ok", Reasoning: "why not"}
	assert.Equal(t, MessageOverhead+1, Message(&answer), "a finished answer's reasoning is not re-sent")
	assert.Equal(t, Message(&call)+Message(&answer), Messages([]model.Message{call, answer}))

	spec := model.ToolSpec{Name: "read_file", Description: "Reads a file.", Parameters: json.RawMessage(`{"type":"object"}`)}
	// 9 + 13 + 17 = 39 bytes → 10 tokens, counted once, not per field.
	assert.Equal(t, ToolOverhead+10, Tool(&spec))
	assert.Equal(t, 2*Tool(&spec), Tools([]model.ToolSpec{spec, spec}))
	assert.Equal(t, 0, System(""))
	assert.Equal(t, MessageOverhead+2, System("You are"))
	assert.Equal(t, System("You are")+Tools([]model.ToolSpec{spec}), Overhead("You are", []model.ToolSpec{spec}))
}
