package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/acpd/acpd/session/credhttp/credhttptest"
)

// providerWithRedirect writes a configuration whose one provider is the
// endpoint r, which answers every request with a 307 to another origin.
func providerWithRedirect(t *testing.T, e *runEnv, r *credhttptest.Redirect, protocol, wireAPI, keyEnv string) string {
	t.Helper()
	wire := ""
	if wireAPI != "" {
		wire = fmt.Sprintf("wireApi = %q\n", wireAPI)
	}
	cfg := filepath.Join(e.dir, "acpd.toml")
	require.NoError(t, os.WriteFile(cfg, []byte(fmt.Sprintf(`[model]
name = "m1"
maxRetries = 3

[modelProviders.p]
protocol = %q
%sbaseUrl = %q
apiKeyEnv = %q
models = [{ id = "m1" }]
`, protocol, wire, r.URL, keyEnv)), 0o644))
	return cfg
}

// The four wire protocols through the built binary: a provider endpoint
// answering 307 to another origin gets the key once, the turn fails naming
// the refused redirect, no retry is spent on it, and the other origin sees
// neither the key (Anthropic's x-api-key, Gemini's x-goog-api-key, OpenAI's
// Authorization) nor the conversation. Without the policy, net/http re-sends
// the body and every non-standard header to the redirect's target.
func TestRedirect_ProviderCredentialsStay(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, protocol, wireAPI, keyEnv, header, value string
	}{
		{"chat-completions", "openai", "", "OPENAI_API_KEY", "Authorization", "Bearer sk-openai-secret"},
		{"responses", "openai", "responses", "OPENAI_API_KEY", "Authorization", "Bearer sk-openai-secret"},
		{"anthropic", "anthropic", "", "ANTHROPIC_API_KEY", "X-Api-Key", "sk-ant-secret"},
		{"gemini", "gemini", "", "GEMINI_API_KEY", "X-Goog-Api-Key", "gemini-secret"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e := newRunEnv(t)
			r := credhttptest.New(t, 0)
			cfg := providerWithRedirect(t, e, r, tc.protocol, tc.wireAPI, tc.keyEnv)
			secret := strings.TrimPrefix(tc.value, "Bearer ")
			e.env = append(e.env, tc.keyEnv+"="+secret)
			o := e.run(t, "", "run", "--config", cfg, "--cwd", e.ws, "--output-format", "json", "THE-CONVERSATION")
			require.NotEqual(t, 0, o.code, o.stdout+o.stderr)
			res := decodeResult(t, strings.TrimSpace(o.stdout))
			require.NotNil(t, res.Error, o.stdout)
			assert.Contains(t, string(res.Error.Data)+res.Error.Message, "refused a redirect from "+r.URL+" to "+r.Sink)

			front := r.Front()
			require.Len(t, front, 1, "a refused redirect is not retried")
			assert.Equal(t, tc.value, front[0].Header.Get(tc.header), "the configured endpoint gets the key")
			assert.Contains(t, front[0].Body, "THE-CONVERSATION")
			assert.Empty(t, r.Leaked(), "the other origin was sent a request")
		})
	}
}

// acpd doctor's model listing, for each protocol's key header: the listing
// fails naming the refused redirect, and the other origin gets nothing.
func TestRedirect_DoctorListing(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		protocol, keyEnv, header, value string
	}{
		{"openai", "OPENAI_API_KEY", "Authorization", "Bearer sk-openai-secret"},
		{"anthropic", "ANTHROPIC_API_KEY", "X-Api-Key", "sk-ant-secret"},
		{"gemini", "GEMINI_API_KEY", "X-Goog-Api-Key", "gemini-secret"},
	} {
		t.Run(tc.protocol, func(t *testing.T) {
			t.Parallel()
			e := newRunEnv(t)
			r := credhttptest.New(t, 0)
			cfg := providerWithRedirect(t, e, r, tc.protocol, "", tc.keyEnv)
			e.env = append(e.env, tc.keyEnv+"="+strings.TrimPrefix(tc.value, "Bearer "))
			o := e.run(t, "", "doctor", "--config", cfg)
			require.Equal(t, 1, o.code, o.stdout+o.stderr)
			assert.Regexp(t, `(?m)^FAIL  providers .*refused a redirect from `+r.URL+` to `+r.Sink, o.stdout)
			front := r.Front()
			require.NotEmpty(t, front)
			assert.Equal(t, tc.value, front[0].Header.Get(tc.header))
			assert.Empty(t, r.Leaked(), "the other origin was sent a request")
		})
	}
}

// The OTLP/HTTP exporters: a collector endpoint answering 307 to another
// origin gets the OTEL_EXPORTER_OTLP_HEADERS; the other origin gets
// neither them nor the spans, and the turn is unaffected. (OTLP/gRPC has
// no redirects: gRPC treats a 3xx as a failed call.)
func TestRedirect_TelemetryHeaders(t *testing.T) {
	t.Parallel()
	e := newRunEnv(t)
	r := credhttptest.New(t, 0)
	e.env = append(e.env, "OTEL_EXPORTER_OTLP_HEADERS=x-collector-token=otlp-secret")
	script := e.script(t, `{"text":"THE-ANSWER"}`+"\n")
	o := e.run(t, "", e.scripted(script, "--output-format", "json", "--telemetry", "--telemetry-protocol", "http",
		"--telemetry-endpoint", r.URL, "go")...)
	require.Equal(t, 0, o.code, o.stderr)
	assert.Equal(t, "end_turn", decodeResult(t, strings.TrimSpace(o.stdout)).StopReason)
	front := r.Front()
	require.NotEmpty(t, front, "the exporters sent nothing")
	for _, f := range front {
		assert.Equal(t, "otlp-secret", f.Header.Get("X-Collector-Token"))
	}
	assert.Empty(t, r.Leaked(), "the other origin was sent an export")
}
