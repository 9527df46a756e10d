package session_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/acpd/acpd/acp"
	"github.com/acpd/acpd/loopdetect"
	"github.com/acpd/acpd/session/model/modeltest"
)

// pollScript is n responses of one read_file call each on path, then a
// final text. With changing set, the model server rewrites the file before
// answering each request, so every read returns something new (a status
// polled until it changes); otherwise every read returns the same.
func pollScript(d *daemon, path string, n int, changing bool) {
	var step atomic.Int64
	if changing {
		d.model.SetResponder(func(modeltest.Request) (modeltest.Response, bool) {
			s := step.Add(1)
			_ = os.WriteFile(path, []byte(fmt.Sprintf("build step %d of %d running\n", s, n)), 0o644)
			return modeltest.Response{}, false // the queue answers
		})
	}
	for i := range n {
		c := readCall(path)
		c.ID = fmt.Sprintf("call_poll_%d", i)
		d.model.Add(modeltest.Response{ToolCalls: []modeltest.ToolCall{c}, WholeArguments: true})
	}
	d.model.Add(modeltest.Response{Text: "done"})
}

func promptLoop(t *testing.T, d *daemon, sid string) (*acp.PromptResponse, map[string]any) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	resp, err := d.cc.Prompt(ctx, sid, "go")
	if err == nil {
		return resp, nil
	}
	var e *acp.Error
	require.ErrorAs(t, err, &e)
	require.Equal(t, loopdetect.LoopDetectedTurnErrorMessage, e.Message)
	b, _ := json.Marshal(e.Data)
	var data map[string]any
	require.NoError(t, json.Unmarshal(b, &data))
	return nil, data
}

// TestE2E_StuckSignalResults: a status polled 130 times whose result
// changes is stopped at call 101 by the default ("calls") and finishes
// under "results"; the same poll with an unchanging result is stopped at
// call 101 under both. acpd stats replays the default's transcript under
// "results" and lets the polling turn through.
func TestE2E_StuckSignalResults(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name     string
		flags    []string
		changing bool
		stops    bool
	}{
		{"calls, changing", nil, true, true},
		{"results, changing", []string{"--stuck-signal", "results"}, true, false},
		{"results, unchanging", []string{"--stuck-signal", "results"}, false, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			cwd := t.TempDir()
			status := filepath.Join(cwd, "status.txt")
			require.NoError(t, os.WriteFile(status, []byte("build step 0 queued\n"), 0o644))
			d := startDaemonIn(t, cwd, t.TempDir(), nil, nil, tc.flags...)
			pollScript(d, status, 130, tc.changing)
			sid := d.session(t)
			resp, data := promptLoop(t, d, sid)
			completed, _ := statusCounts(d.cc.Updates())
			if !tc.stops {
				require.NotNil(t, resp, "%v", data)
				assert.Equal(t, acp.StopEndTurn, resp.StopReason)
				assert.Equal(t, 130, completed)
				return
			}
			require.NotNil(t, data)
			assert.Equal(t, "stuck", data["capReason"])
			assert.EqualValues(t, 101, data["toolCalls"])
			assert.Equal(t, 100, completed)
			if slicesContain(tc.flags, "results") {
				assert.Equal(t, "results", data["stuckSignal"])
				assert.EqualValues(t, 100, data["resultRepeat"], "the results of calls 1-100 are known at call 101")
			}
			if tc.changing {
				// The what-if replay over the recorded turn: "results" would
				// have let it go on.
				out, err := exec.Command(acpdBin, "stats", "--config", os.DevNull, "--data-dir", d.dataDir,
					"--format", "json", "--stuck-signal", "results").Output()
				require.NoError(t, err)
				var rep struct {
					Turns []struct {
						Replay string
						WhatIf *struct{ Stops bool }
					}
				}
				require.NoError(t, json.Unmarshal(out, &rep))
				require.Len(t, rep.Turns, 1)
				assert.Equal(t, "finished", rep.Turns[0].Replay)
				require.NotNil(t, rep.Turns[0].WhatIf)
				assert.False(t, rep.Turns[0].WhatIf.Stops)
			}
		})
	}
}

func slicesContain(s []string, v string) bool {
	for _, e := range s {
		if e == v {
			return true
		}
	}
	return false
}

// eachWarnCase runs f as a parallel subtest under both stuck signals, for
// a model that keeps repeating and for one that changes approach after
// the warning; each gets a fresh workspace cwd holding one file that never
// changes, same.
func eachWarnCase(t *testing.T, f func(t *testing.T, signal string, changes bool, cwd, same string)) {
	for _, signal := range []string{"calls", "results"} {
		for _, changes := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s, changes approach %t", signal, changes), func(t *testing.T) {
				t.Parallel()
				cwd := t.TempDir()
				same := filepath.Join(cwd, "same.txt")
				require.NoError(t, os.WriteFile(same, []byte("nothing new"), 0o644))
				f(t, signal, changes, cwd, same)
			})
		}
	}
}

// TestE2E_LoopRecoveryWarn: under "warn" the stuck turn is not stopped at
// call 101; the model's next request carries the warning after that call's
// result, and the editor is shown it. A model that keeps repeating is
// stopped at the next call with capReason stuck_after_warning; one that
// changes approach finishes end_turn. Both stuck signals.
func TestE2E_LoopRecoveryWarn(t *testing.T) {
	t.Parallel()
	eachWarnCase(t, func(t *testing.T, signal string, changes bool, cwd, same string) {
		d := startDaemonIn(t, cwd, t.TempDir(), nil, nil, "--loop-recovery", "warn", "--stuck-signal", signal)
		n := 130
		if changes {
			n = 101
		}
		pollScript(d, same, n, false)
		if changes {
			// After the warning: other files, then the answer (the
			// final "done" of pollScript is then unused).
			d.model.SetResponder(func(r modeltest.Request) (modeltest.Response, bool) {
				if len(r.Messages) == 0 || !strings.Contains(r.Messages[len(r.Messages)-1].Text(), "Repeating it again will stop this turn") &&
					!strings.Contains(r.Messages[len(r.Messages)-1].Text(), "other_") {
					return modeltest.Response{}, false
				}
				k := strings.Count(lastText(r), "other_") // 0 after the warning
				if k >= 10 {
					return modeltest.Response{Text: "changed approach; done"}, true
				}
				p := filepath.Join(cwd, fmt.Sprintf("other_%d.txt", k))
				_ = os.WriteFile(p, []byte(fmt.Sprintf("other_%d ", k)+strings.Repeat("other_ ", k)), 0o644)
				c := readCall(p)
				c.ID = fmt.Sprintf("call_other_%d", k)
				return modeltest.Response{ToolCalls: []modeltest.ToolCall{c}, WholeArguments: true}, true
			})
		}
		sid := d.session(t)
		resp, data := promptLoop(t, d, sid)

		// The request after call 101 ends with the warning.
		var warned *modeltest.Request
		reqs := d.model.Requests()
		for i := range reqs {
			if strings.Contains(lastText(reqs[i]), "Repeating it again will stop this turn") {
				warned = &reqs[i]
				break
			}
		}
		require.NotNil(t, warned, "the model was warned")
		w := lastText(*warned)
		assert.Contains(t, w, "the same read_file call")
		if signal == "results" {
			assert.Contains(t, w, "with the same result")
		}
		shown := false
		for _, u := range d.cc.Updates() {
			if c := u.Update.Content; c != nil && strings.Contains(c.Text, "Repeating it again will stop this turn") {
				shown = true
			}
		}
		assert.True(t, shown, "the editor is shown the warning")

		if changes {
			require.NotNil(t, resp, "%v", data)
			assert.Equal(t, acp.StopEndTurn, resp.StopReason)
			completed, _ := statusCounts(d.cc.Updates())
			assert.Equal(t, 111, completed)
			return
		}
		require.NotNil(t, data)
		assert.Equal(t, "stuck_after_warning", data["capReason"])
		assert.Equal(t, true, data["warned"])
		assert.EqualValues(t, 102, data["toolCalls"], "stopped at the next repeat")
		stop := loopStopRecord(t, d.dataDir, sid)
		assert.Contains(t, stop, `"warned":true`)
	})
}

// lastText is the text of a request's last message.
func lastText(r modeltest.Request) string {
	if len(r.Messages) == 0 {
		return ""
	}
	return r.Messages[len(r.Messages)-1].Text()
}

// TestE2E_SubagentStuckSignalResults: a subagent run polling a status
// whose result changes is let through under "results" (its own guard
// counts results) and stopped under the default.
func TestE2E_SubagentStuckSignalResults(t *testing.T) {
	t.Parallel()
	for _, results := range []bool{false, true} {
		t.Run(fmt.Sprintf("results %t", results), func(t *testing.T) {
			t.Parallel()
			cwd := t.TempDir()
			status := filepath.Join(cwd, "status.txt")
			require.NoError(t, os.WriteFile(status, []byte("queued"), 0o644))
			const key = "POLLING-TASK-9"
			var flags []string
			if results {
				flags = []string{"--stuck-signal", "results"}
			}
			d := startDaemonIn(t, cwd, t.TempDir(), nil, []modeltest.Response{
				{ToolCalls: []modeltest.ToolCall{agentTC("call_poll", "Poll it", key+": read status.txt until it says done", "")}},
				{Text: "The subagent reported."},
			}, flags...)
			var step atomic.Int64
			d.model.SetResponder(func(modeltest.Request) (modeltest.Response, bool) {
				s := step.Add(1)
				_ = os.WriteFile(status, []byte(fmt.Sprintf("step %d running", s)), 0o644)
				return modeltest.Response{}, false
			})
			for i := range 110 {
				c := readCall(status)
				c.ID = fmt.Sprintf("call_status_%d", i)
				d.model.Add(modeltest.Response{Match: key, ToolCalls: []modeltest.ToolCall{c}, WholeArguments: true})
			}
			d.model.Add(modeltest.Response{Match: key, Text: "status is done"})
			sid := d.session(t)
			skip := len(d.cc.Updates())
			resp, err := d.cc.Prompt(t.Context(), sid, "go")
			require.NoError(t, err)
			assert.Equal(t, acp.StopEndTurn, resp.StopReason)
			st, text := finalContent(d.cc.Updates()[skip:], "call_poll")
			if results {
				assert.Equal(t, acp.StatusCompleted, st, text)
				assert.Contains(t, text, "status is done")
				assert.Equal(t, 111, d.model.ServedMatching(key))
			} else {
				assert.Equal(t, acp.StatusFailed, st)
				assert.Contains(t, text, "cap reason stuck, 101 tool calls")
			}
		})
	}
}

// TestE2E_SubagentLoopRecoveryWarn: under "warn" a subagent run stuck on
// one read (same call, same result) is warned at its call 101 instead of
// stopped: the run's own model reads the warning after that call's
// result, and an editor that takes notices is shown it as one. A run
// whose model changes approach then finishes and its answer is the agent
// call's result; one that repeats is stopped at its next call, the agent
// call failing with capReason stuck_after_warning while the parent's turn
// goes on. Both stuck signals.
func TestE2E_SubagentLoopRecoveryWarn(t *testing.T) {
	t.Parallel()
	const warning = "Repeating it again will stop this turn"
	eachWarnCase(t, func(t *testing.T, signal string, changes bool, cwd, same string) {
		const key = "STUCK-TASK-7"
		d := startDaemonIn(t, cwd, t.TempDir(), nil, []modeltest.Response{
			{ToolCalls: []modeltest.ToolCall{agentTC("call_stuck", "Read it", key+": read same.txt until it changes", "")}},
			{Text: "The subagent reported."},
		}, "--loop-recovery", "warn", "--stuck-signal", signal)
		for i := range 110 {
			c := readCall(same)
			c.ID = fmt.Sprintf("call_same_%d", i)
			d.model.Add(modeltest.Response{Match: key, ToolCalls: []modeltest.ToolCall{c}, WholeArguments: true})
		}
		if changes {
			// The run's model, once warned, stops reading and answers.
			d.model.SetResponder(func(r modeltest.Request) (modeltest.Response, bool) {
				if strings.Contains(lastText(r), warning) {
					return modeltest.Response{Text: "same.txt never changes; giving up on it"}, true
				}
				return modeltest.Response{}, false
			})
		}
		ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
		defer cancel()
		sid := d.noticeSession(ctx, t)
		waitCommands(t, d, sid, 1)
		skip := len(d.cc.Updates())
		resp, err := d.cc.Prompt(ctx, sid, "go")
		require.NoError(t, err, "the parent's turn is not stopped")
		assert.Equal(t, acp.StopEndTurn, resp.StopReason)

		// The run's request after its call 101 ends with the
		// warning, and no other request carries it.
		sub := subRequests(d.model, key)
		require.GreaterOrEqual(t, len(sub), 102, "the run went past its call 101")
		assert.Contains(t, lastText(sub[101]), warning, "the run's model is warned after call 101's result")
		for i := range 101 {
			assert.NotContains(t, lastText(sub[i]), warning, "request %d", i+1)
		}
		warned := 0
		for _, r := range d.model.Requests() {
			if strings.Contains(lastText(r), warning) {
				warned++
			}
		}
		assert.Equal(t, 1, warned, "one request of all, the run's, carries the warning")
		live := d.cc.Updates()[skip:]
		var shown []acp.Notice
		for _, u := range live {
			if n := u.Update.Notice; n != nil && n.Title == "The turn looks stuck in a loop" {
				shown = append(shown, *n)
			}
		}
		require.Len(t, shown, 1, "one warning notice")
		assert.Equal(t, acp.SeverityWarning, shown[0].Severity)
		assert.Contains(t, shown[0].Description, warning)

		st, text := finalContent(live, "call_stuck")
		if changes {
			assert.Equal(t, acp.StatusCompleted, st, text)
			assert.Equal(t, "same.txt never changes; giving up on it", text)
			assert.Equal(t, 101, d.model.ServedMatching(key), "101 reads, then the answer")
			return
		}
		assert.Equal(t, acp.StatusFailed, st)
		assert.Contains(t, text, "cap reason stuck_after_warning, 102 tool calls")
		assert.Equal(t, 102, d.model.ServedMatching(key), "stopped at the call after the warning")
	})
}

// TestE2E_LoopRecoveryWarnDuplicate: the global duplicate behind
// skipLoopDetection = false follows loopRecovery = "warn" too. A model
// reading one unchanging file is warned where "stop" would halt (the 6th
// call; under "results" the 7th, when six equal results are known) and
// stopped at its next call with loopType global_tool_call_duplicate and
// warned; one that changes approach after the warning finishes end_turn.
func TestE2E_LoopRecoveryWarnDuplicate(t *testing.T) {
	t.Parallel()
	const warning = "Repeating it again will stop this turn"
	eachWarnCase(t, func(t *testing.T, signal string, changes bool, cwd, same string) {
		warnAt := map[string]int{"calls": 6, "results": 7}[signal]
		d := startDaemonIn(t, cwd, t.TempDir(), nil, nil,
			"--skip-loop-detection=false", "--loop-recovery", "warn", "--stuck-signal", signal)
		pollScript(d, same, 20, false)
		if changes {
			d.model.SetResponder(func(r modeltest.Request) (modeltest.Response, bool) {
				if strings.Contains(lastText(r), warning) {
					return modeltest.Response{Text: "same.txt never changes; stopping here"}, true
				}
				return modeltest.Response{}, false
			})
		}
		sid := d.session(t)
		resp, data := promptLoop(t, d, sid)
		reqs := d.model.Requests()
		at := 0
		for i, r := range reqs {
			if strings.Contains(lastText(r), warning) {
				require.Zero(t, at, "warned once")
				at = i // request i follows call i
			}
		}
		assert.Equal(t, warnAt, at, "warned after call %d's result", warnAt)
		completed, _ := statusCounts(d.cc.Updates())
		if changes {
			require.NotNil(t, resp, "%v", data)
			assert.Equal(t, acp.StopEndTurn, resp.StopReason)
			assert.Equal(t, warnAt, completed)
			return
		}
		require.NotNil(t, data)
		assert.Equal(t, "global_tool_call_duplicate", data["loopType"])
		assert.Equal(t, true, data["warned"])
		assert.EqualValues(t, warnAt+1, data["toolCalls"], "stopped at the call after the warning")
		assert.Equal(t, warnAt, completed)
	})
}
