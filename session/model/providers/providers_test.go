package providers

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/acpd/acpd/session/model/anthropic"
	"github.com/acpd/acpd/session/model/chat"
)

func TestNew_ByProtocol(t *testing.T) {
	t.Parallel()
	p, err := New(Spec{ID: "local", Protocol: "openai", BaseURL: "http://127.0.0.1:1/v1"})
	require.NoError(t, err)
	assert.IsType(t, &chat.Client{}, p, "the openai protocol defaults to chat completions")
	p, err = New(Spec{ID: "local", Protocol: "openai", WireAPI: WireChatCompletions, BaseURL: "http://127.0.0.1:1/v1"})
	require.NoError(t, err)
	assert.IsType(t, &chat.Client{}, p)

	p, err = New(Spec{ID: "claude", Protocol: "anthropic"})
	require.NoError(t, err)
	assert.IsType(t, &anthropic.Client{}, p)

	_, err = New(Spec{ID: "corp", Protocol: "smoke-signals"})
	require.Error(t, err)
	assert.Contains(t, err.Error(), `provider "corp"`)
	assert.Contains(t, err.Error(), `unknown protocol "smoke-signals"`)
	assert.Contains(t, err.Error(), "openai/chat-completions", "the error lists what is known")
}

func TestKey(t *testing.T) {
	t.Parallel()
	assert.Equal(t, "openai/chat-completions", Key("openai", ""))
	assert.Equal(t, "openai/responses", Key("openai", "responses"))
	assert.Equal(t, "anthropic", Key("anthropic", ""))
	assert.True(t, Supported("openai", ""))
	assert.False(t, Supported("openai", "telepathy"))
}
