package tools

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestBadArguments_NewTools: every malformed call of web_fetch and
// exit_plan_mode a model might send is refused by Build (which the session
// reports as an invalid-params tool result and counts toward the
// invalid-params guard) with a message naming the parameter; none panics
// and none reaches the network.
func TestBadArguments_NewTools(t *testing.T) {
	d := &dialRecorder{}
	env := fetchEnv(t, d, nil)
	long := "https://example.com/" + strings.Repeat("a", 1<<20)
	tests := []struct {
		tool, args, want string
	}{
		{NameWebFetch, `{"prompt":"p"}`, `missing properties: ["url"]`},
		{NameWebFetch, `{"url":42,"prompt":"p"}`, "params/url"},
		{NameWebFetch, `{"url":null,"prompt":"p"}`, "params/url"},
		{NameWebFetch, `{"url":["https://example.com"],"prompt":"p"}`, "params/url"},
		{NameWebFetch, `{"url":"","prompt":"p"}`, "params/url"},
		{NameWebFetch, `{"url":"   ","prompt":"p"}`, "params/url"},
		{NameWebFetch, `{"url":"ftp://example.com/x","prompt":"p"}`, "params/url"},
		{NameWebFetch, `{"url":"file:///etc/passwd","prompt":"p"}`, "params/url"},
		{NameWebFetch, `{"url":"example.com","prompt":"p"}`, "params/url"},
		{NameWebFetch, `{"url":"http://exa mple.com/","prompt":"p"}`, "params/url"},
		{NameWebFetch, `{"url":"http://[::1","prompt":"p"}`, "params/url"},
		{NameWebFetch, `{"url":"http://%zz/","prompt":"p"}`, "params/url"},
		{NameWebFetch, `{"url":"https://example.com\u0000/","prompt":"p"}`, "params/url"},
		{NameWebFetch, `{"url":"` + long + `","prompt":"p"}`, "params/url"},
		{NameWebFetch, `{"url":"https://example.com"}`, `missing properties: ["prompt"]`},
		{NameWebFetch, `{"url":"https://example.com","prompt":7}`, "params/prompt"},
		{NameWebFetch, `[]`, "invalid parameters for web_fetch"},
		{NameWebFetch, `"https://example.com"`, "invalid parameters for web_fetch"},
		{NameWebFetch, `{"url":`, "invalid parameters for web_fetch"},
		{NameExitPlanMode, `{}`, `missing properties: ["plan"]`},
		{NameExitPlanMode, ``, `missing properties: ["plan"]`},
		{NameExitPlanMode, `{"plan":""}`, "params/plan"},
		{NameExitPlanMode, `{"plan":"  \n\t "}`, "params/plan"},
		{NameExitPlanMode, `{"plan":5}`, "params/plan"},
		{NameExitPlanMode, `{"plan":null}`, "params/plan"},
		{NameExitPlanMode, `{"plan":{"steps":["a"]}}`, "params/plan"},
		{NameExitPlanMode, `null`, "invalid parameters for exit_plan_mode"},
		{NameExitPlanMode, `{"plan":"x"`, "invalid parameters for exit_plan_mode"},
	}
	for _, tt := range tests {
		name := tt.tool + " " + tt.args
		if len(name) > 80 {
			name = name[:80]
		}
		t.Run(name, func(t *testing.T) {
			var c Call
			var err error
			require.NotPanics(t, func() { c, err = tool(t, tt.tool).Build(env, json.RawMessage(tt.args)) })
			require.Error(t, err, "a call was built: %v", c)
			assert.Contains(t, err.Error(), tt.want)
			assert.Less(t, len(err.Error()), 4096, "the error does not echo an overlong argument whole")
		})
	}
	edge := "https://example.com/" + strings.Repeat("a", webFetchMaxURL-len("https://example.com/"))
	_, err := tool(t, NameWebFetch).Build(env, args(t, map[string]any{"url": edge, "prompt": "p"}))
	require.NoError(t, err, "a URL of exactly the limit is fetched")
	_, err = tool(t, NameWebFetch).Build(env, args(t, map[string]any{"url": edge + "a", "prompt": "p"}))
	require.ErrorContains(t, err, "params/url: 8193 bytes long; at most 8192")
	assert.Empty(t, d.attempts())
}
