package session_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/acpd/acpd/acp"
	"github.com/acpd/acpd/loopdetect"
	"github.com/acpd/acpd/session/model/modeltest"
)

// TestE2E_BadNewToolArgumentsFeedTheGuard drives the built daemon with a
// model that keeps sending malformed web_fetch and exit_plan_mode calls:
// each is shown as a failed tool call naming the parameter (every frame
// checked against the ACP schema by the client), none reaches the network
// or the editor's permission dialog, and the third bad call of one tool
// stops the turn with the invalid-params loop error rather than running
// on.
func TestE2E_BadNewToolArgumentsFeedTheGuard(t *testing.T) {
	for _, tc := range []struct {
		name  string
		flags []string
		calls []modeltest.ToolCall
		wants []string
	}{
		{
			name: "web_fetch",
			calls: []modeltest.ToolCall{
				call("web_fetch", map[string]any{"url": "ftp://example.com/x", "prompt": "p"}),
				call("web_fetch", map[string]any{"prompt": "p"}),
				call("web_fetch", map[string]any{"url": "file:///etc/passwd", "prompt": "p"}),
			},
			wants: []string{"params/url: only http and https", `missing properties: ["url"]`, "params/url: only http and https"},
		},
		{
			name:  "web_fetch overlong and non-string",
			calls: []modeltest.ToolCall{call("web_fetch", map[string]any{"url": "https://example.com/" + strings.Repeat("a", 9000), "prompt": "p"}), call("web_fetch", map[string]any{"url": 42, "prompt": "p"}), call("web_fetch", map[string]any{"url": "", "prompt": "p"})},
			wants: []string{"params/url: 9020 bytes long", "params/url", "params/url"},
		},
		{
			name:  "exit_plan_mode",
			flags: []string{"--approval-mode", "plan"},
			calls: []modeltest.ToolCall{
				call("exit_plan_mode", map[string]any{}),
				call("exit_plan_mode", map[string]any{"plan": " \n "}),
				call("exit_plan_mode", map[string]any{"plan": 5}),
			},
			wants: []string{`missing properties: ["plan"]`, "params/plan", "params/plan"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pc := &planClient{answer: "proceed_once"}
			d := startDaemon(t, pc.fake(), nil, tc.flags...)
			for _, c := range tc.calls {
				d.model.Add(calls(c))
			}
			d.model.Add(modeltest.Response{Text: "never reached"})
			sid := d.session(t)
			_, err := d.cc.Prompt(ctxFor(t), sid, "go")
			var e *acp.Error
			require.ErrorAs(t, err, &e)
			assert.Equal(t, acp.CodeInternalError, e.Code)
			assert.Equal(t, loopdetect.LoopDetectedTurnErrorMessage, e.Message)
			data, ok := e.Data.(map[string]any)
			require.True(t, ok, "data is %T", e.Data)
			assert.Equal(t, string(loopdetect.LoopInvalidToolParamsStagnation), data["loopType"])

			var failed []string
			for _, u := range forSession(d.cc.Updates(), sid) {
				if u.ToolCallUpdate != nil && u.ToolCallUpdate.Status == acp.StatusFailed {
					var text []string
					for _, c := range u.ToolCallUpdate.Content {
						if c.Content != nil {
							text = append(text, c.Content.Text)
						}
					}
					failed = append(failed, strings.Join(text, " "))
				}
			}
			require.Len(t, failed, len(tc.wants), "one failed tool call per bad call")
			for i, w := range tc.wants {
				assert.Contains(t, failed[i], w)
				assert.Less(t, len(failed[i]), 1024, "the refusal does not echo an overlong argument")
			}
			pc.mu.Lock()
			assert.Empty(t, pc.reqs, "no permission asked for a malformed call")
			pc.mu.Unlock()
			assert.Len(t, d.model.Requests(), len(tc.calls), "the turn stopped at the third bad call")
		})
	}
}
