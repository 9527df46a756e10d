package session_test

import (
	"context"
	"os"
	"os/exec"
	"sync"
	"testing"
	"time"

	sdk "github.com/coder/acp-go-sdk"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/acpd/acpd/acp/acptest"
	"github.com/acpd/acpd/session/model/modeltest"
)

// askingSDKClient is the Go SDK editor with form elicitation: it answers
// each elicitation/create with the next of answers.
type askingSDKClient struct {
	*acptest.SDKClient
	mu      sync.Mutex
	asked   []sdk.UnstableCreateElicitationRequest
	answers []sdk.UnstableCreateElicitationResponse
}

func (c *askingSDKClient) UnstableCreateElicitation(_ context.Context, p sdk.UnstableCreateElicitationRequest) (sdk.UnstableCreateElicitationResponse, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.asked = append(c.asked, p)
	a := c.answers[0]
	c.answers = c.answers[1:]
	return a, nil
}

func (c *askingSDKClient) UnstableCompleteElicitation(context.Context, sdk.UnstableCompleteElicitationNotification) error {
	return nil
}

// TestInterop_GoSDKQuestions drives the built acpd with coder/acp-go-sdk's
// client (the newest the module proxy serves, v0.13.5) advertising form
// elicitation, in plan mode (asking changes nothing, so plan mode may ask):
// the model's ask_user_question reaches the SDK's elicitation handler; a
// declined form and an accepted one each end the turn normally, the model
// reading "declined" and then the answer.
func TestInterop_GoSDKQuestions(t *testing.T) {
	ask := `{"questions":[{"question":"Which database?","header":"Database","options":[{"label":"Postgres"},{"label":"SQLite"}]}]}`
	srv := modeltest.NewServer(t,
		modeltest.Response{ToolCalls: []modeltest.ToolCall{{ID: "q1", Name: "ask_user_question", Arguments: ask}}},
		modeltest.Response{Text: "I will pick one myself."},
		modeltest.Response{ToolCalls: []modeltest.ToolCall{{ID: "q2", Name: "ask_user_question", Arguments: ask}}},
		modeltest.Response{Text: "SQLite then."},
	)
	cmd := exec.Command(acpdBin, "--config", os.DevNull, "--provider", "openai", "--base-url", srv.BaseURL(),
		"--model", "scripted", "--data-dir", t.TempDir(), "--log-level", "warn", "--approval-mode", "plan")
	cmd.Env = append(os.Environ(), "XDG_CONFIG_HOME="+t.TempDir(), "OPENAI_API_KEY=test-key")
	stdin, err := cmd.StdinPipe()
	require.NoError(t, err)
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	cmd.Stderr = &testLog{t: t}
	require.NoError(t, cmd.Start())
	t.Cleanup(func() {
		_ = stdin.Close()
		acptest.WaitExit(t, cmd, 5*time.Second)
	})
	client := &askingSDKClient{SDKClient: &acptest.SDKClient{}, answers: []sdk.UnstableCreateElicitationResponse{
		{Decline: &sdk.UnstableCreateElicitationDecline{Action: "decline"}},
		{Accept: &sdk.UnstableCreateElicitationAccept{Action: "accept", Content: map[string]any{"answer_1": "SQLite"}}},
	}}
	cs := sdk.NewClientSideConnection(client, stdin, stdout)
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	_, err = cs.Initialize(ctx, sdk.InitializeRequest{ProtocolVersion: sdk.ProtocolVersionNumber, ClientCapabilities: sdk.ClientCapabilities{
		Elicitation: &sdk.ElicitationCapabilities{Form: &sdk.ElicitationFormCapabilities{}}}})
	require.NoError(t, err)
	sess, err := cs.NewSession(ctx, sdk.NewSessionRequest{Cwd: t.TempDir(), McpServers: []sdk.McpServer{}})
	require.NoError(t, err)
	for _, prompt := range []string{"set it up", "again"} {
		resp, err := cs.Prompt(ctx, sdk.PromptRequest{SessionId: sess.SessionId, Prompt: []sdk.ContentBlock{sdk.TextBlock(prompt)}})
		require.NoError(t, err)
		assert.Equal(t, sdk.StopReasonEndTurn, resp.StopReason)
	}
	client.mu.Lock()
	require.Len(t, client.asked, 2)
	require.NotNil(t, client.asked[0].Form, "form mode")
	assert.Equal(t, "Which database?", client.asked[0].Form.Message)
	client.mu.Unlock()

	toolText := func(id string) string {
		for _, r := range srv.Requests() {
			for _, m := range r.Messages {
				if m.Role == "tool" && m.ToolCallID == id {
					return m.Text()
				}
			}
		}
		return ""
	}
	assert.Contains(t, toolText("q1"), "The user declined to answer.")
	assert.Contains(t, toolText("q2"), "Answer: SQLite")
	assert.Equal(t, 4, srv.Served())
}
