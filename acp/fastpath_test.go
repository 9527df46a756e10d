package acp

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestAppendTextChunk_MatchesMarshal(t *testing.T) {
	texts := []string{"", "plain ascii", "quote \" backslash \\ newline \n tab \t", "<html>&", "héllo ✓", "bad \xff utf8", "\u2028 sep", "\x00\x1f"}
	for _, kind := range []string{UpdateAgentMessageChunk, UpdateAgentThoughtChunk, UpdateUserMessageChunk} {
		for _, text := range texts {
			for _, mid := range []string{"", "m\"1"} {
				block := TextBlock(text)
				n := &SessionNotification{SessionID: "s\n1", Update: SessionUpdate{Kind: kind, Content: &block, MessageID: mid}}
				fast, ok := appendTextChunk(nil, n)
				require.True(t, ok)
				params, err := json.Marshal(n)
				require.NoError(t, err)
				slow := `{"jsonrpc":"2.0","method":"session/update","params":` + string(params) + `}`
				assert.True(t, json.Valid(fast), "%q", fast)
				assert.JSONEq(t, slow, string(fast))
			}
		}
	}
	block := ContentBlock{Type: ContentText, Text: "x", Meta: Meta{"k": 1}}
	_, ok := appendTextChunk(nil, &SessionNotification{SessionID: "s", Update: SessionUpdate{Kind: UpdateAgentMessageChunk, Content: &block}})
	assert.False(t, ok, "_meta must take the generic path")
	_, ok = appendTextChunk(nil, &SessionNotification{SessionID: "s", Update: SessionUpdate{Kind: UpdatePlan}})
	assert.False(t, ok)
}
