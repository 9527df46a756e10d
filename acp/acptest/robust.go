package acptest

import (
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// StartFunc starts a fresh agent and returns its stdin and stdout. The agent
// must answer initialize; it is stopped by closing stdin (and by t.Cleanup).
type StartFunc func(t *testing.T) (stdin io.WriteCloser, stdout io.Reader)

const replyTimeout = 10 * time.Second

// initLine is an initialize request with the given raw JSON id.
func initLine(id string) string {
	return `{"jsonrpc":"2.0","id":` + id + `,"method":"initialize","params":{"protocolVersion":1,"clientCapabilities":{}}}`
}

// nextResponse skips agent notifications and requests and returns the next
// response.
func nextResponse(t *testing.T, rc *RawClient) Message {
	t.Helper()
	return nextResponseWithin(t, rc, replyTimeout)
}

// nextResponseWithin is nextResponse with its own wait, for lines so large
// that reading them under the race detector on a loaded machine takes longer
// than an ordinary reply.
func nextResponseWithin(t *testing.T, rc *RawClient, wait time.Duration) Message {
	t.Helper()
	for {
		m, err := rc.NextMessage(wait)
		require.NoError(t, err)
		if m.Method == "" {
			return m
		}
	}
}

// expectError reads the next response and checks its id (raw JSON) and code.
func expectError(t *testing.T, rc *RawClient, id string, code int) Message {
	t.Helper()
	m := nextResponse(t, rc)
	require.NotNil(t, m.Error, "expected error %d, got %s", code, m.Raw)
	assert.Equal(t, code, m.Error.Code, "%s", m.Raw)
	assert.Equal(t, id, string(m.ID), "%s", m.Raw)
	assert.Nil(t, m.Result, "%s", m.Raw)
	return m
}

// expectInitialize sends initialize with id and checks the agent answers
// protocolVersion 1 with the id echoed byte for byte.
func expectInitialize(t *testing.T, rc *RawClient, id string) {
	t.Helper()
	require.NoError(t, rc.Send(initLine(id)))
	m := nextResponse(t, rc)
	require.Nil(t, m.Error, "%s", m.Raw)
	assert.Equal(t, id, string(m.ID))
	var r struct {
		ProtocolVersion int `json:"protocolVersion"`
	}
	require.NoError(t, json.Unmarshal(m.Result, &r), "%s", m.Raw)
	assert.Equal(t, 1, r.ProtocolVersion)
}

// RunRobustness runs the malformed-input suite against agents made by
// start: every case gets the right error (or none, for notifications) and a
// following initialize still succeeds.
func RunRobustness(t *testing.T, start StartFunc) {
	open := func(t *testing.T) *RawClient {
		stdin, stdout := start(t)
		rc := NewRawClient(stdin, stdout)
		t.Cleanup(func() { _ = rc.CloseStdin(); rc.Stop() })
		return rc
	}

	errorCases := []struct {
		name string
		line string
		id   string // expected raw id in the reply
		code int
	}{
		{"invalid JSON", `{not json`, "null", -32700},
		{"truncated JSON", `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":`, "null", -32700},
		{"JSON array", `[` + initLine("1") + `]`, "null", -32600},
		{"empty array", `[]`, "null", -32600},
		{"empty object", `{}`, "null", -32600},
		{"scalar", `42`, "null", -32600},
		{"no method", `{"jsonrpc":"2.0","id":7}`, "7", -32600},
		{"non-string method", `{"jsonrpc":"2.0","id":8,"method":5}`, "8", -32600},
		{"wrong jsonrpc version", `{"jsonrpc":"1.0","id":9,"method":"initialize","params":{"protocolVersion":1}}`, "9", -32600},
		{"fractional id", `{"jsonrpc":"2.0","id":1.5,"method":"initialize","params":{"protocolVersion":1}}`, "null", -32600},
		{"object id", `{"jsonrpc":"2.0","id":{"a":1},"method":"initialize","params":{"protocolVersion":1}}`, "null", -32600},
		{"unknown method", `{"jsonrpc":"2.0","id":3,"method":"foo/bar","params":{}}`, "3", -32601},
		{"unknown extension method", `{"jsonrpc":"2.0","id":"x","method":"_vendor/thing","params":{}}`, `"x"`, -32601},
		{"case-mangled method", `{"jsonrpc":"2.0","id":4,"method":"Initialize","params":{"protocolVersion":1}}`, "4", -32601},
	}
	for _, tc := range errorCases {
		t.Run(tc.name, func(t *testing.T) {
			rc := open(t)
			require.NoError(t, rc.Send(tc.line))
			expectError(t, rc, tc.id, tc.code)
			expectInitialize(t, rc, "100")
		})
	}

	idCases := []struct{ name, id string }{
		{"negative id", "-1"},
		{"id 2^53", "9007199254740992"},
		{"id beyond int64", "123456789012345678901234567890"},
		{"zero id", "0"},
		{"string id", `"abc"`},
		{"empty string id", `""`},
		{"string id with escapes", `"a\"b\\c\u00e9"`},
		{"prefix-like string id", `"acpd-in-1"`},
	}
	for _, tc := range idCases {
		t.Run(tc.name, func(t *testing.T) {
			rc := open(t)
			expectInitialize(t, rc, tc.id)
			expectInitialize(t, rc, "101")
		})
	}

	t.Run("unknown notifications are ignored", func(t *testing.T) {
		rc := open(t)
		for _, l := range []string{
			`{"jsonrpc":"2.0","method":"foo/bar","params":{}}`,
			`{"jsonrpc":"2.0","method":"_vendor/ping"}`,
			`{"jsonrpc":"2.0","method":"$/progress","params":{"x":1}}`,
			`{"jsonrpc":"2.0","method":"session/cancel","params":{"sessionId":"nope"}}`,
			`{"jsonrpc":"2.0","method":"session/cancel","params":{"sessionId":5}}`,
			`{"jsonrpc":"2.0","method":"$/cancel_request","params":{"requestId":12345}}`,
			`{"jsonrpc":"2.0","id":"r1","result":{}}`,
			`{"jsonrpc":"2.0","id":-5,"error":{"code":-32603,"message":"stray"}}`,
		} {
			require.NoError(t, rc.Send(l))
		}
		// The very next line must be the initialize response.
		require.NoError(t, rc.Send(initLine("102")))
		m, err := rc.NextMessage(replyTimeout)
		require.NoError(t, err)
		assert.Equal(t, "102", string(m.ID), "unexpected line %s", m.Raw)
		assert.Nil(t, m.Error)
	})

	paramCases := []struct {
		method, params, field string
	}{
		{"initialize", `{"protocolVersion":"1"}`, "protocolVersion"},
		{"initialize", `{}`, "protocolVersion"},
		{"initialize", `{"protocolVersion":70000}`, "protocolVersion"},
		{"initialize", `[]`, "params"},
		{"authenticate", `{"methodId":5}`, "methodId"},
		{"session/new", `{"cwd":5,"mcpServers":[]}`, "cwd"},
		{"session/new", `{"cwd":"relative/dir","mcpServers":[]}`, "cwd"},
		{"session/new", `{"cwd":"/tmp","mcpServers":{}}`, "mcpServers"},
		{"session/new", `{"mcpServers":[]}`, "cwd"},
		{"session/new", `{"cwd":"/tmp","mcpServers":[],"additionalDirectories":["rel"]}`, "additionalDirectories[0]"},
		{"session/new", `{"Cwd":"/tmp","cwd":"/tmp","mcpServers":[]}`, "Cwd"},
		{"session/new", `"x"`, "params"},
		{"session/load", `{"sessionId":1,"cwd":"/tmp","mcpServers":[]}`, "sessionId"},
		{"session/resume", `{"sessionId":"s","cwd":["/tmp"]}`, "cwd"},
		{"session/list", `{"cwd":7}`, "cwd"},
		{"session/close", `{"sessionId":null}`, "sessionId"},
		{"session/delete", `{"sessionId":true}`, "sessionId"},
		{"session/set_mode", `{"sessionId":"s","modeId":1}`, "modeId"},
		{"session/set_config_option", `{"sessionId":"s","configId":"c","value":1}`, "value"},
		{"session/prompt", `{"sessionId":"s","prompt":"hi"}`, "prompt"},
		{"session/prompt", `{"sessionId":"s","prompt":[{"type":"bogus"}]}`, "prompt[0].type"},
		{"session/prompt", `{"sessionId":"s"}`, "prompt"},
		{"session/prompt", `{"prompt":[]}`, "sessionId"},
	}
	for i, tc := range paramCases {
		t.Run("wrong params "+tc.method+" "+strconv.Itoa(i), func(t *testing.T) {
			rc := open(t)
			require.NoError(t, rc.Send(fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":%q,"params":%s}`, 200+i, tc.method, tc.params)))
			m := expectError(t, rc, strconv.Itoa(200+i), -32602)
			var data struct {
				Field string `json:"field"`
			}
			_ = json.Unmarshal(m.Error.Data, &data)
			assert.Equal(t, tc.field, data.Field, "%s", m.Raw)
			expectInitialize(t, rc, "103")
		})
	}

	t.Run("100 MiB line", func(t *testing.T) {
		rc := open(t)
		const size = 100 << 20
		var b strings.Builder
		b.Grow(size + 200)
		b.WriteString(`{"jsonrpc":"2.0","id":"big","method":"session/prompt","params":{"sessionId":"none","prompt":[{"type":"text","text":"`)
		for b.Len() < size {
			b.WriteString("aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa")
		}
		b.WriteString(`"}]}}`)
		line := b.String()
		sent := make(chan error, 1)
		go func() { sent <- rc.Send(line) }()
		m := nextResponseWithin(t, rc, 90*time.Second)
		require.NotNil(t, m.Error, "a 100 MiB line must be rejected (oversized) or fail (unknown session): %s", truncate(m.Raw))
		if string(m.ID) == "null" {
			assert.Equal(t, -32600, m.Error.Code)
		} else {
			assert.Equal(t, `"big"`, string(m.ID))
		}
		select {
		case err := <-sent:
			require.NoError(t, err)
		case <-time.After(30 * time.Second):
			t.Fatal("agent stopped reading during the oversized line")
		}
		expectInitialize(t, rc, "104")
	})

	t.Run("10000 requests without reading", func(t *testing.T) {
		rc := open(t)
		const n = 10000
		sent := make(chan error, 1)
		go func() {
			var b strings.Builder
			for i := range n {
				b.WriteString(initLine(strconv.Itoa(i)))
				b.WriteByte('\n')
			}
			_, err := io.WriteString(rc.w, b.String())
			sent <- err
		}()
		// Nothing is read until every request has been written: the agent
		// must keep reading while its stdout is blocked.
		select {
		case err := <-sent:
			require.NoError(t, err)
		case <-time.After(60 * time.Second):
			t.Fatal("agent stopped reading stdin while its stdout was full (deadlock)")
		}
		seen := make([]bool, n)
		for range n {
			m := nextResponse(t, rc)
			require.Nil(t, m.Error, "%s", m.Raw)
			i, err := strconv.Atoi(string(m.ID))
			require.NoError(t, err, "%s", m.Raw)
			require.False(t, seen[i], "id %d answered twice", i)
			seen[i] = true
		}
		expectInitialize(t, rc, "105")
	})
}
