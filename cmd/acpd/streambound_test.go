//go:build linux

package main

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// One 400 MiB `data:` line without a newline, from each wire protocol's
// endpoint, through the built binary: the turn fails with the stream
// reader's bound named, the endpoint is asked once (not retried), and
// acpd's peak resident memory stays far below the line (it grew to
// 430 MiB before the bound).
func TestRunCmd_HugeStreamLineIsBounded(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ name, protocol, wireAPI string }{
		{"chat-completions", "openai", ""},
		{"responses", "openai", "responses"},
		{"anthropic", "anthropic", ""},
		{"gemini", "gemini", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var hits atomic.Int32
			var sent atomic.Int64
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				hits.Add(1)
				w.Header().Set("Content-Type", "text/event-stream")
				_, _ = w.Write([]byte("data: {\"x\":\""))
				chunk := bytes.Repeat([]byte("a"), 64<<10)
				for range (400 << 20) / len(chunk) {
					if _, err := w.Write(chunk); err != nil {
						return
					}
					sent.Add(int64(len(chunk)))
				}
			}))
			t.Cleanup(srv.Close)
			e := newRunEnv(t)
			wire := ""
			if tc.wireAPI != "" {
				wire = fmt.Sprintf("wireApi = %q\n", tc.wireAPI)
			}
			cfg := filepath.Join(e.dir, "acpd.toml")
			require.NoError(t, os.WriteFile(cfg, []byte(fmt.Sprintf(`[model]
name = "m1"
maxRetries = 3

[modelProviders.p]
protocol = %q
%sbaseUrl = %q
apiKeyEnv = "P_KEY"
models = [{ id = "m1" }]
`, tc.protocol, wire, srv.URL)), 0o644))
			ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
			defer cancel()
			cmd := exec.CommandContext(ctx, acpdBinary(t), "run", "--config", cfg, "--cwd", e.ws, "--output-format", "json", "hi")
			cmd.Env = append(e.env, "P_KEY=k")
			var out, errOut bytes.Buffer
			cmd.Stdout, cmd.Stderr = &out, &errOut
			require.NoError(t, cmd.Start())
			peak := watchPeakRSS(cmd.Process.Pid)
			_ = cmd.Wait()
			require.NoError(t, ctx.Err(), errOut.String())
			require.NotEqual(t, 0, cmd.ProcessState.ExitCode(), out.String())
			res := decodeResult(t, strings.TrimSpace(out.String()))
			require.NotNil(t, res.Error, out.String())
			assert.Contains(t, res.Error.Message+string(res.Error.Data), "the model server sent a stream event over 16 MiB")
			assert.Equal(t, int32(1), hits.Load(), "not retried")
			t.Logf("peak RSS %.1f MiB; the endpoint wrote %.1f MiB", float64(peak.Load())/(1<<20), float64(sent.Load())/(1<<20))
			assert.Less(t, peak.Load(), int64(128<<20), "acpd grew with the line")
		})
	}
}

// watchPeakRSS follows pid's high-water resident set (VmHWM) until the
// process is gone. The child's rusage cannot tell it: Go starts children
// with vfork, so their ru_maxrss starts from the parent's own high-water
// mark, which under -race alone is several hundred MiB.
func watchPeakRSS(pid int) *atomic.Int64 {
	var peak atomic.Int64
	go func() {
		status := fmt.Sprintf("/proc/%d/status", pid)
		for {
			data, err := os.ReadFile(status)
			if err != nil {
				return
			}
			for line := range strings.Lines(string(data)) {
				if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
					var kb int64
					if _, err := fmt.Sscanf(strings.TrimSpace(v), "%d kB", &kb); err == nil && kb<<10 > peak.Load() {
						peak.Store(kb << 10)
					}
				}
			}
			time.Sleep(5 * time.Millisecond)
		}
	}()
	return &peak
}
