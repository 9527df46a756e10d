package servere2e

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/acpd/acpd/acp/acptest"
	"github.com/acpd/acpd/session/model/modeltest"
)

// TestRemote_SessionStreamRefused: when the daemon refuses the SSE stream
// the client opens for a new session (here server.maxStreams, counting the
// connection's own stream, is 2, so the second session's is refused with
// 429), the client's reader ends with that refusal. The session's updates
// can never arrive; a client that swallowed the refusal waited for them
// forever.
func TestRemote_SessionStreamRefused(t *testing.T) {
	cfg := filepath.Join(t.TempDir(), "config.toml")
	require.NoError(t, os.WriteFile(cfg, []byte("[server]\nmaxStreams = 2\n"), 0o600))
	d := serve(t, modeltest.NewServer(t), nil, "--config", cfg)
	hs := acptest.DialHTTP(d.URL, d.Header(), nil)
	t.Cleanup(func() { _ = hs.Close() })

	lines := make(chan string, 64)
	readErr := make(chan error, 1)
	go func() {
		sc := bufio.NewScanner(hs.Reader())
		sc.Buffer(make([]byte, 1<<16), 1<<24)
		for sc.Scan() {
			lines <- sc.Text()
		}
		readErr <- sc.Err()
	}()
	send := func(id int, method string, params any) {
		b, err := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": id, "method": method, "params": params})
		require.NoError(t, err)
		_, err = hs.Write(append(b, '\n'))
		require.NoError(t, err, method)
	}
	// answered waits for the reply to id and returns the session it names.
	answered := func(id int) string {
		for {
			// The reader sends every line before its end, so a line
			// waiting is taken first: a refusal coming right after the
			// answer must not win a select against it.
			var l string
			select {
			case l = <-lines:
			default:
				select {
				case l = <-lines:
				case err := <-readErr:
					t.Fatalf("the stream ended before the answer to %d: %v", id, err)
				case <-time.After(time.Minute):
					t.Fatalf("no answer to %d", id)
				}
			}
			var m struct {
				ID     json.RawMessage
				Method string
				Result struct{ SessionID string }
			}
			require.NoError(t, json.Unmarshal([]byte(l), &m), l)
			if m.Method == "" && string(m.ID) == fmt.Sprint(id) {
				return m.Result.SessionID
			}
		}
	}
	send(1, "initialize", map[string]any{"protocolVersion": 1})
	answered(1)
	cwd := t.TempDir()
	send(2, "session/new", map[string]any{"cwd": cwd, "mcpServers": []any{}})
	require.NotEmpty(t, answered(2))
	send(3, "session/new", map[string]any{"cwd": cwd, "mcpServers": []any{}})
	second := answered(3)
	require.NotEmpty(t, second)

	for {
		select {
		case <-lines: // the first session's updates
		case err := <-readErr:
			require.Error(t, err, "the reader ends with the refusal")
			assert.Contains(t, err.Error(), second)
			assert.Contains(t, err.Error(), "429")
			assert.ErrorContains(t, hs.Err(), "too many open streams")
			return
		case <-time.After(time.Minute):
			t.Fatal("the refused session stream went unreported: the reader waits forever")
		}
	}
}
