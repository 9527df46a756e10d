package main

import (
	"bufio"
	"context"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/acpd/acpd/config"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// answerWatcher is serve's stdout: when a line answering request 1 is
// written, it records whether the session index had been touched yet.
type answerWatcher struct {
	lockPath string
	mu       sync.Mutex
	buf      strings.Builder
	answered chan struct{}
	lockSeen bool
}

func (w *answerWatcher) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.answered != nil && strings.HasPrefix(string(p), `{"id":1,`) {
		// Still inside the write: the answer is not on the wire yet, so
		// whatever has happened to the index happened before it.
		_, err := os.Stat(w.lockPath)
		w.lockSeen = err == nil
		close(w.answered)
		w.answered = nil
	}
	w.buf.Write(p)
	return len(p), nil
}

// TestServe_InitializeAnsweredBeforeIndexRead checks that the daemon
// answers initialize before it reads the session index (the load takes the
// index lock first, creating the lock file): an editor waits for that answer
// at every agent start, and the load would share the CPU with it. Once the
// answer is out the load runs on its own, without a session method asking.
func TestServe_InitializeAnsweredBeforeIndexRead(t *testing.T) {
	t.Parallel()
	sb := newSandbox(t)
	dataDir := filepath.Join(sb.dir, "data")
	sb.env["ACPD_DATA_DIR"] = dataDir
	out := &answerWatcher{lockPath: filepath.Join(dataDir, "index.lock"), answered: make(chan struct{})}
	answered := out.answered
	stdinR, stdinW := io.Pipe()
	done := make(chan int, 1)
	var gotDataDir string
	go func() {
		done <- runWith(t.Context(), nil, stdinR, out, io.Discard, deps{
			getenv: func(k string) string { return sb.env[k] },
			serve: func(ctx context.Context, cfg config.Config, stdin io.Reader, stdout io.Writer, logger *slog.Logger, onReady func()) error {
				gotDataDir = cfg.Session.DataDir
				return serve(ctx, cfg, stdin, stdout, logger, onReady)
			},
		})
	}()
	_, err := io.WriteString(stdinW, `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":1}}`+"\n")
	require.NoError(t, err)
	select {
	case <-answered:
	case <-time.After(30 * time.Second):
		t.Fatal("no initialize answer")
	}
	require.Equal(t, dataDir, gotDataDir, "the test's data dir is the daemon's")
	out.mu.Lock()
	lockSeen := out.lockSeen
	line, _ := bufio.NewReader(strings.NewReader(out.buf.String())).ReadString('\n')
	out.mu.Unlock()
	assert.Contains(t, line, `"loadSession":true`, "the store is open when initialize is answered")
	assert.False(t, lockSeen, "the session index was read before initialize was answered")
	// The answer out, the load starts by itself and writes the index.
	require.Eventually(t, func() bool {
		_, err := os.Stat(filepath.Join(dataDir, "index.json"))
		return err == nil
	}, 30*time.Second, time.Millisecond, "the index was not loaded after initialize")
	require.NoError(t, stdinW.Close())
	select {
	case code := <-done:
		assert.Equal(t, exitOK, code)
	case <-time.After(30 * time.Second):
		t.Fatal("serve did not stop at EOF")
	}
}
