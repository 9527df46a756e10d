package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/acpd/acpd/acp"
	"github.com/acpd/acpd/session/model/modeltest"
)

// pollScenario makes srv play one turn of n read_file calls of status.txt,
// one per response. With changing set, the file is rewritten before every
// response, so each read returns a new status. From call switchAt on (0:
// never) the model changes approach: it reads a different file each time.
func pollScenario(srv *modeltest.Server, ws string, n int, changing bool, switchAt int) {
	var mu sync.Mutex
	served := 0
	status := filepath.Join(ws, "status.txt")
	_ = os.WriteFile(status, []byte("queued\n"), 0o644)
	srv.SetResponder(func(r modeltest.Request) (modeltest.Response, bool) {
		if len(r.Tools) == 0 || len(r.Messages) == 0 {
			return modeltest.Response{Text: "ok"}, true
		}
		mu.Lock()
		defer mu.Unlock()
		if served >= n {
			return modeltest.Response{Text: "done"}, true
		}
		served++
		path := status
		if switchAt > 0 && served >= switchAt {
			path = filepath.Join(ws, fmt.Sprintf("other_%d.txt", served))
			_ = os.WriteFile(path, []byte(fmt.Sprintf("other %d\n", served)), 0o644)
		} else if changing {
			_ = os.WriteFile(status, []byte(fmt.Sprintf("step %d running\n", served)), 0o644)
		}
		return modeltest.Response{ToolCalls: []modeltest.ToolCall{{ID: fmt.Sprintf("call_%d", served), Name: "read_file",
			Arguments: fmt.Sprintf(`{"file_path":%q}`, path)}}, WholeArguments: true}, true
	})
}

// TestGuard_InnerAcpdStuckSignal: acpd guard in front of acpd reads the
// results from the tool_call_update content: a status polled 130 times
// that changes every time is stopped at call 101 by the default and goes
// to the end under "results"; an unchanging one is stopped under
// "results" too; under "warn" the editor is shown the warning and the
// turn stops at the next repeat.
func TestGuard_InnerAcpdStuckSignal(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name     string
		flags    []string
		changing bool
		reason   string // "" for end_turn
		calls    int
		switchAt int // the call from which the model reads other files (0: never)
	}{
		{"calls, changing", nil, true, "stuck", 101, 0},
		{"results, changing", []string{"--stuck-signal", "results"}, true, "", 0, 0},
		{"results, unchanging", []string{"--stuck-signal", "results"}, false, "stuck", 101, 0},
		{"results and warn, unchanging", []string{"--stuck-signal", "results", "--loop-recovery", "warn"}, false, "stuck_after_warning", 102, 0},
		// Warned at call 101, the model reads other files from call 102 on.
		{"results and warn, changes approach", []string{"--stuck-signal", "results", "--loop-recovery", "warn"}, false, "", 0, 102},
		{"calls and warn, changes approach", []string{"--loop-recovery", "warn"}, false, "", 0, 102},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			srv := modeltest.NewServer(t)
			a := innerAcpd(t, srv)
			pollScenario(srv, a.ws, 130, tt.changing, tt.switchAt)
			g := startGuard(t, a, t.TempDir(), tt.flags...)
			sid := g.newSession(a.ws)
			stop, e := g.prompt(sid, "poll")
			if tt.reason == "" {
				require.Nil(t, e, "stderr:\n%s", g.stderr.String())
				assert.Equal(t, acp.StopEndTurn, stop)
			} else {
				d := loopData(t, e)
				assert.Equal(t, tt.reason, d["capReason"])
				assert.EqualValues(t, tt.calls, d["toolCalls"])
				if strings.Contains(tt.name, "warn") {
					assert.Equal(t, true, d["warned"])
				}
			}
			if strings.Contains(tt.name, "warn") {
				// Shown once, whether the turn then stopped or went on.
				assert.Equal(t, 1, g.warningsShown(), "the editor is shown the warning once")
			}
			g.closeAndCheck()
		})
	}
}
