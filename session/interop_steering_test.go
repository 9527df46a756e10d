package session_test

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/acpd/acpd/acp/acptest"
	"github.com/acpd/acpd/session/model/modeltest"
)

// steerEvent is one event of a scenario as steering.mjs saw it.
type steerEvent struct {
	Ev         string          `json:"ev"`
	Kind       string          `json:"kind"`
	MessageID  string          `json:"messageId"`
	Text       string          `json:"text"`
	ToolCallID string          `json:"toolCallId"`
	Status     string          `json:"status"`
	Replay     bool            `json:"replay"`
	Outcome    string          `json:"outcome"`
	Reason     string          `json:"reason"`
	StopReason string          `json:"stopReason"`
	Meta       json.RawMessage `json:"meta"`
	Code       int             `json:"code"`
	Message    string          `json:"message"`
}

type steerSummary struct {
	InitMeta  json.RawMessage `json:"initMeta"`
	Scenarios map[string]struct {
		SessionID string       `json:"sessionId"`
		Events    []steerEvent `json:"events"`
	} `json:"scenarios"`
	SDKErrors []string `json:"sdkErrors"`
}

// mergeChunks joins the consecutive agent_message_chunks of one message
// into one event with the whole text.
func mergeChunks(evs []steerEvent) []steerEvent {
	var out []steerEvent
	for _, e := range evs {
		if n := len(out); n > 0 && e.Kind == "agent_message_chunk" && out[n-1].Kind == e.Kind &&
			out[n-1].MessageID == e.MessageID && out[n-1].Replay == e.Replay {
			out[n-1].Text += e.Text
			continue
		}
		out = append(out, e)
	}
	return out
}

// index is the position of the first event after from that f accepts, -1
// when none does.
func index(evs []steerEvent, from int, f func(steerEvent) bool) int {
	for i := max(from, 0); i < len(evs); i++ {
		if f(evs[i]) {
			return i
		}
	}
	return -1
}

func userChunk(text string, replay bool) func(steerEvent) bool {
	return func(e steerEvent) bool {
		return e.Kind == "user_message_chunk" && e.Replay == replay && strings.HasPrefix(e.Text, text)
	}
}

func agentText(text string, replay bool) func(steerEvent) bool {
	return func(e steerEvent) bool {
		return e.Kind == "agent_message_chunk" && e.Replay == replay && strings.Contains(e.Text, text)
	}
}

func steerFinished(replay bool) func(steerEvent) bool {
	return func(e steerEvent) bool {
		return e.Kind == "tool_call_update" && e.Replay == replay && e.Status == "completed"
	}
}

// requestsOf are the model requests of the scenario whose first prompt
// holds key.
func requestsOf(srv *modeltest.Server, key string) []modeltest.Request {
	var out []modeltest.Request
	for _, r := range srv.Requests() {
		for _, m := range r.Messages {
			if m.Role == "user" {
				if strings.Contains(m.Text(), key) {
					out = append(out, r)
				}
				break
			}
		}
	}
	return out
}

// messagesSplit cuts a chat request body into what precedes its messages'
// closing bracket and what follows it.
func messagesSplit(t *testing.T, body []byte) (head, tail []byte) {
	t.Helper()
	var fields map[string]json.RawMessage
	require.NoError(t, json.Unmarshal(body, &fields))
	msgs := fields["messages"]
	at := bytes.Index(body, msgs)
	require.Positive(t, at)
	end := at + len(msgs) - 1 // the closing bracket
	require.Equal(t, byte(']'), body[end])
	return body[:end], body[end:]
}

// assertCacheKept checks that next repeats prev byte for byte up to the
// end of prev's messages (the provider's cached prefix), and that what
// follows the messages (the tool list, the options) is the same too.
func assertCacheKept(t *testing.T, prev, next modeltest.Request) {
	t.Helper()
	ph, pt := messagesSplit(t, prev.Body)
	nh, nt := messagesSplit(t, next.Body)
	assert.True(t, bytes.HasPrefix(nh, ph), "the next request does not repeat the previous one's prefix byte for byte:\nprev: %s\nnext: %s", ph, nh)
	assert.Equal(t, string(pt), string(nt), "what follows the messages changed")
}

// lastUser is the texts of the request's trailing user messages, after
// its last tool message.
func lastUser(r modeltest.Request) (texts []string, afterTool bool) {
	i := len(r.Messages)
	for i > 0 && r.Messages[i-1].Role == "user" {
		i--
	}
	for _, m := range r.Messages[i:] {
		texts = append(texts, m.Text())
	}
	return texts, i > 0 && r.Messages[i-1].Role == "tool"
}

// TestInterop_Steering drives the built acpd with the official TypeScript
// SDK as an editor that steers turns with _session/steering (an extension
// method call), one session per scenario.
func TestInterop_Steering(t *testing.T) {
	node, npm := acptest.NodeAndNPM(t, "the steering interop test")
	clientDir := acptest.InteropClient(t, npm, interopDir)

	shell := func(cmd string) []modeltest.ToolCall {
		b, err := json.Marshal(map[string]string{"command": cmd})
		require.NoError(t, err)
		return []modeltest.ToolCall{{Name: "run_shell_command", Arguments: string(b)}}
	}
	srv := modeltest.NewServer(t)
	srv.Add(
		modeltest.Response{Match: "SCN-inject", ToolCalls: shell("sleep 2; echo slow-done")},
		modeltest.Response{Match: "SCN-inject", Text: "done with the blue file"},
		modeltest.Response{Match: "SCN-idle", Text: "hi"},
		modeltest.Response{Match: "SCN-idle", Text: "detached answer"},
		modeltest.Response{Match: "SCN-permission", ToolCalls: shell("echo perm")},
		modeltest.Response{Match: "SCN-permission", Text: "listed"},
		modeltest.Response{Match: "SCN-cancel", ToolCalls: shell("sleep 30")},
		modeltest.Response{Match: "SCN-three", ToolCalls: shell("sleep 2")},
		modeltest.Response{Match: "SCN-three", Text: "three done"},
		modeltest.Response{Match: "SCN-command", ToolCalls: shell("sleep 2")},
		modeltest.Response{Match: "SCN-command", Text: "blue it is"},
		// The side question's answer comes with a call the model was
		// told it cannot make: it must not run.
		modeltest.Response{Match: "SCN-btw", ToolCalls: shell("sleep 2")},
		modeltest.Response{Match: "SCN-btw", Text: "BTW-answer: the blue one", ToolCalls: shell("touch btw-tool-ran")},
		modeltest.Response{Match: "SCN-btw", Text: "btw turn done"},
		modeltest.Response{Match: "SCN-btw", Text: "BTW-idle-answer"},
		modeltest.Response{Match: "SCN-race", Text: "first answer", Delay: 1500 * time.Millisecond},
		modeltest.Response{Match: "SCN-race", Text: "race done"},
	)
	workspace := t.TempDir()
	cmds := filepath.Join(workspace, ".acpd", "commands")
	require.NoError(t, os.MkdirAll(cmds, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(cmds, "blue.md"), []byte("Switch to the blue file: $ARGUMENTS\n"), 0o644))
	dataDir := t.TempDir()
	out, _ := acptest.RunInteropScript(t, node, clientDir, "steering.mjs", workspace,
		[]string{"XDG_CONFIG_HOME=" + t.TempDir(), "OPENAI_API_KEY=test-key"},
		acpdBin, "--config", os.DevNull, "--provider", "openai", "--base-url", srv.BaseURL(), "--model", "scripted",
		"--data-dir", dataDir, "--log-level", "warn")
	var sum steerSummary
	require.NoError(t, json.Unmarshal(out, &sum))
	assert.Empty(t, sum.SDKErrors)
	assert.JSONEq(t, `{"steering":{"supported":true}}`, string(sum.InitMeta), "initialize advertises the extension at its top-level _meta")

	scenario := func(name string) []steerEvent {
		sc, ok := sum.Scenarios[name]
		require.True(t, ok, "scenario %s missing", name)
		return mergeChunks(sc.Events)
	}
	prompts := func(evs []steerEvent) []steerEvent {
		var out []steerEvent
		for _, e := range evs {
			if e.Ev == "prompt" {
				out = append(out, e)
			}
		}
		return out
	}

	t.Run("a steer during a slow tool lands after its result, in the same turn, cache kept", func(t *testing.T) {
		evs := scenario("inject")
		st := index(evs, 0, func(e steerEvent) bool { return e.Ev == "steer" })
		require.GreaterOrEqual(t, st, 0)
		assert.Equal(t, "injected", evs[st].Outcome)
		require.NotEmpty(t, evs[st].MessageID)
		done := index(evs, 0, steerFinished(false))
		echo := index(evs, 0, userChunk("STEER-inject", false))
		answer := index(evs, 0, agentText("done with the blue file", false))
		require.True(t, done >= 0 && echo > done && answer > echo, "the steer shows after the tool's result and before the answer: %+v", evs)
		assert.Equal(t, evs[st].MessageID, evs[echo].MessageID, "the echo carries the steer's messageId")
		ps := prompts(evs)
		require.Len(t, ps, 1, "the prompt answers once")
		assert.Equal(t, "end_turn", ps[0].StopReason)

		reqs := requestsOf(srv, "SCN-inject")
		require.Len(t, reqs, 2)
		texts, afterTool := lastUser(reqs[1])
		assert.Equal(t, []string{"STEER-inject: use the blue file"}, texts, "the next request ends with the steer")
		assert.True(t, afterTool, "right after the tool's result")
		assertCacheKept(t, reqs[0], reqs[1])

		// session/load replays it where it landed.
		rdone := index(evs, 0, steerFinished(true))
		recho := index(evs, 0, userChunk("STEER-inject", true))
		ranswer := index(evs, 0, agentText("done with the blue file", true))
		require.True(t, rdone >= 0 && recho > rdone && ranswer > recho, "replayed in place: %+v", evs)
		assert.Equal(t, evs[st].MessageID, evs[recho].MessageID)
	})

	t.Run("idle: promptRequired when asked, content untouched; startedNewTurn otherwise", func(t *testing.T) {
		evs := scenario("idle")
		var outcomes []string
		for _, e := range evs {
			if e.Ev == "steer" {
				outcomes = append(outcomes, e.Outcome+"/"+e.Reason)
			}
		}
		assert.Equal(t, []string{"promptRequired/noRunningTurn", "startedNewTurn/"}, outcomes)
		assert.Negative(t, index(evs, 0, userChunk("STEER-idle-required", false)))
		reqs := requestsOf(srv, "SCN-idle")
		require.Len(t, reqs, 2, "the promptRequired steer asked the model nothing; the other started one turn")
		for _, r := range reqs {
			assert.NotContains(t, string(r.Body), "STEER-idle-required")
		}
		texts, _ := lastUser(reqs[1])
		assert.Equal(t, []string{"STEER-idle-new"}, texts)
		assert.GreaterOrEqual(t, index(evs, 0, agentText("detached answer", false)), 0)
		assert.Len(t, prompts(evs), 1)
	})

	t.Run("a steer sent during a permission request is inserted after the answer", func(t *testing.T) {
		evs := scenario("permission")
		perm := index(evs, 0, func(e steerEvent) bool { return e.Ev == "permission" })
		st := index(evs, 0, func(e steerEvent) bool { return e.Ev == "steer" })
		answered := index(evs, 0, func(e steerEvent) bool { return e.Ev == "permission-answered" })
		done := index(evs, 0, steerFinished(false))
		echo := index(evs, 0, userChunk("STEER-permission", false))
		require.True(t, perm >= 0 && st > perm && answered > st, "the steer was sent while the request waited: %+v", evs)
		assert.Equal(t, "injected", evs[st].Outcome)
		require.True(t, done > answered && echo > done, "inserted after the answer and the tool's result: %+v", evs)
		reqs := requestsOf(srv, "SCN-permission")
		require.Len(t, reqs, 2)
		texts, afterTool := lastUser(reqs[1])
		assert.Equal(t, []string{"STEER-permission: and list it too"}, texts)
		assert.True(t, afterTool)
		assertCacheKept(t, reqs[0], reqs[1])
	})

	t.Run("a steer accepted just before session/cancel is never inserted, and the client is told", func(t *testing.T) {
		evs := scenario("cancel")
		st := index(evs, 0, func(e steerEvent) bool { return e.Ev == "steer" })
		require.GreaterOrEqual(t, st, 0)
		assert.Equal(t, "injected", evs[st].Outcome)
		ps := prompts(evs)
		require.Len(t, ps, 1)
		assert.Equal(t, "cancelled", ps[0].StopReason)
		var meta struct {
			Steering struct {
				Undelivered []struct {
					MessageID string `json:"messageId"`
					Prompt    []struct {
						Text string `json:"text"`
					} `json:"prompt"`
				} `json:"undelivered"`
			} `json:"steering"`
		}
		require.NoError(t, json.Unmarshal(ps[0].Meta, &meta), "meta: %s", ps[0].Meta)
		require.Len(t, meta.Steering.Undelivered, 1, "the cancelled prompt lists the steer it did not deliver: %s", ps[0].Meta)
		assert.Equal(t, evs[st].MessageID, meta.Steering.Undelivered[0].MessageID)
		require.Len(t, meta.Steering.Undelivered[0].Prompt, 1)
		assert.Equal(t, "STEER-cancel: never mind that", meta.Steering.Undelivered[0].Prompt[0].Text)
		assert.Negative(t, index(evs, 0, userChunk("STEER-cancel", false)), "never echoed")
		assert.Negative(t, index(evs, 0, userChunk("STEER-cancel", true)), "never replayed")
		reqs := requestsOf(srv, "SCN-cancel")
		assert.Len(t, reqs, 1, "the model was asked nothing after the cancel")
	})

	t.Run("three steers in a row keep their order", func(t *testing.T) {
		evs := scenario("three")
		a := index(evs, 0, userChunk("STEER-3a", false))
		b := index(evs, 0, userChunk("STEER-3b", false))
		c := index(evs, 0, userChunk("STEER-3c", false))
		require.True(t, a >= 0 && b > a && c > b, "echoed in order: %+v", evs)
		reqs := requestsOf(srv, "SCN-three")
		require.Len(t, reqs, 2)
		texts, afterTool := lastUser(reqs[1])
		assert.Equal(t, []string{"STEER-3a", "STEER-3b", "STEER-3c"}, texts)
		assert.True(t, afterTool)
		assertCacheKept(t, reqs[0], reqs[1])
		assert.Len(t, prompts(evs), 1)
	})

	t.Run("a file command in a steer is expanded, a built-in refused while a turn runs", func(t *testing.T) {
		evs := scenario("command")
		e := index(evs, 0, func(e steerEvent) bool { return e.Ev == "steer-error" })
		require.GreaterOrEqual(t, e, 0, "/help was refused: %+v", evs)
		assert.Equal(t, -32602, evs[e].Code)
		assert.Contains(t, evs[e].Message, "/help is a command")
		reqs := requestsOf(srv, "SCN-command")
		require.Len(t, reqs, 2)
		texts, afterTool := lastUser(reqs[1])
		assert.Equal(t, []string{"Switch to the blue file: now please"}, texts)
		assert.True(t, afterTool)
		assert.GreaterOrEqual(t, index(evs, 0, userChunk("Switch to the blue file: now please", false)), 0, "the echo shows what the model read")
	})

	t.Run("/btw answers while the turn runs, on its prefix, without tools, and is never kept", func(t *testing.T) {
		sc := sum.Scenarios["btw"]
		evs := scenario("btw")
		var btws []string
		for _, e := range evs {
			if e.Ev == "btw" {
				btws = append(btws, e.StopReason)
			}
		}
		assert.Equal(t, []string{"end_turn", "end_turn"}, btws)
		answer := index(evs, 0, agentText("BTW-answer: the blue one", false))
		first := index(evs, 0, func(e steerEvent) bool { return e.Ev == "btw" })
		turnEnd := index(evs, 0, func(e steerEvent) bool { return e.Ev == "prompt" })
		require.True(t, answer >= 0 && first > answer && turnEnd > first,
			"the side answer came, and its prompt answered, while the turn ran: %+v", evs)
		assert.JSONEq(t, `{"source":"side_answer"}`, string(evs[answer].Meta), "marked as a side answer")
		assert.Equal(t, "end_turn", evs[turnEnd].StopReason)
		idle := index(evs, 0, agentText("BTW-idle-answer", false))
		require.Greater(t, idle, turnEnd)
		assert.JSONEq(t, `{"source":"side_answer"}`, string(evs[idle].Meta))

		for _, e := range evs {
			assert.NotContains(t, e.Text, "btw-tool-ran", "no tool of the side answer was shown")
		}
		assert.NoFileExists(t, filepath.Join(workspace, "btw-tool-ran"), "the call in the side answer never ran")

		reqs := requestsOf(srv, "SCN-btw")
		require.Len(t, reqs, 4, "turn, side question, turn, side question")
		side, next, idleSide := reqs[1], reqs[2], reqs[3]
		// The side request is the turn's request as sent, then the question.
		ph, pt := messagesSplit(t, reqs[0].Body)
		sh, st := messagesSplit(t, side.Body)
		assert.True(t, bytes.HasPrefix(sh, ph), "the side request repeats the session's request byte for byte:\nsession: %s\nside:    %s", ph, sh)
		require.Len(t, side.Messages, len(reqs[0].Messages)+1)
		last := side.Messages[len(side.Messages)-1]
		assert.Equal(t, "user", last.Role)
		assert.Equal(t, "BTW-question: which file?", last.Text())
		var sideTail, turnTail map[string]json.RawMessage
		require.NoError(t, json.Unmarshal(append([]byte(`{"x":[`), st...), &sideTail))
		require.NoError(t, json.Unmarshal(append([]byte(`{"x":[`), pt...), &turnTail))
		assert.JSONEq(t, string(turnTail["tools"]), string(sideTail["tools"]), "the same tool list")
		assert.JSONEq(t, `"none"`, string(sideTail["tool_choice"]), "tool use off")
		assert.NotContains(t, turnTail, "tool_choice")

		// The turn goes on as if nothing was asked, its cache kept.
		assert.NotContains(t, string(next.Body), "BTW-")
		assertCacheKept(t, reqs[0], next)

		// Idle: the whole conversation, as the next prompt would send it.
		nh, _ := messagesSplit(t, next.Body)
		ih, _ := messagesSplit(t, idleSide.Body)
		assert.True(t, bytes.HasPrefix(ih, nh), "the idle side request repeats the conversation")
		require.Len(t, idleSide.Messages, len(next.Messages)+2)
		assert.Equal(t, "btw turn done", idleSide.Messages[len(next.Messages)].Text())
		assert.Equal(t, "BTW-idle: and now?", idleSide.Messages[len(next.Messages)+1].Text())
		assert.NotContains(t, string(idleSide.Body), "BTW-answer", "an earlier side answer is not in the conversation")

		// Not in the transcript: neither the replay nor the file holds it.
		for _, e := range evs {
			if e.Replay {
				assert.NotContains(t, e.Text, "BTW", "replayed: %+v", e)
			}
		}
		require.NotEmpty(t, sc.SessionID)
		var found bool
		require.NoError(t, filepath.WalkDir(dataDir, func(path string, d os.DirEntry, err error) error {
			if err != nil || d.IsDir() || !strings.Contains(path, sc.SessionID) {
				return err
			}
			b, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			found = found || bytes.Contains(b, []byte("SCN-btw"))
			assert.NotContains(t, string(b), "BTW", "%s holds the side question", path)
			return nil
		}))
		assert.True(t, found, "the session's transcript was found")
	})

	t.Run("a steer racing the end of the turn starts no unowned turn with promptRequired", func(t *testing.T) {
		evs := scenario("race")
		var outcomes []string
		for _, e := range evs {
			if e.Ev == "steer" {
				outcomes = append(outcomes, e.Outcome)
			}
		}
		assert.Equal(t, []string{"injected", "promptRequired"}, outcomes)
		ps := prompts(evs)
		require.Len(t, ps, 1, "the prompt answers once")
		assert.Equal(t, "end_turn", ps[0].StopReason)
		p := slices.IndexFunc(evs, func(e steerEvent) bool { return e.Ev == "prompt" })
		assert.Negative(t, index(evs, p+1, func(e steerEvent) bool { return e.Ev == "update" }), "nothing runs after the prompt's answer: %+v", evs)
		echo := index(evs, 0, userChunk("STEER-race-in", false))
		first := index(evs, 0, agentText("first answer", false))
		second := index(evs, 0, agentText("race done", false))
		require.True(t, first >= 0 && echo > first && second > echo, "read after the answer it raced, then answered: %+v", evs)
		reqs := requestsOf(srv, "SCN-race")
		require.Len(t, reqs, 2)
		texts, _ := lastUser(reqs[1])
		assert.Equal(t, []string{"STEER-race-in"}, texts)
		assertCacheKept(t, reqs[0], reqs[1])
		for _, r := range reqs {
			assert.NotContains(t, string(r.Body), "STEER-race-late")
		}
	})
}

// TestInterop_PromptQueueing drives the built acpd twice with the official
// TypeScript SDK, sending three prompts to one session without waiting:
// with the client's opt-in (clientCapabilities._meta.promptQueueing) each
// waits for the one before and runs in order, its slash command expanded;
// without it, today's behaviour: each new prompt cancels the running one.
func TestInterop_PromptQueueing(t *testing.T) {
	node, npm := acptest.NodeAndNPM(t, "the prompt queueing interop test")
	clientDir := acptest.InteropClient(t, npm, interopDir)
	sleep := func(cmd string) []modeltest.ToolCall {
		return []modeltest.ToolCall{{Name: "run_shell_command", Arguments: `{"command":"` + cmd + `"}`}}
	}
	srv := modeltest.NewServer(t,
		modeltest.Response{Match: "QUEUE-queued", ToolCalls: sleep("sleep 2")},
		modeltest.Response{Match: "QUEUE-queued", Text: "first done"},
		modeltest.Response{Match: "QUEUE-queued", Text: "second done"},
		modeltest.Response{Match: "QUEUE-queued", Text: "third done"},
		modeltest.Response{Match: "QUEUE-default", ToolCalls: sleep("sleep 30")},
		modeltest.Response{Match: "QUEUE-default", Text: "second", Delay: 3 * time.Second},
		modeltest.Response{Match: "QUEUE-default", Text: "third done"},
	)
	workspace := t.TempDir()
	cmds := filepath.Join(workspace, ".acpd", "commands")
	require.NoError(t, os.MkdirAll(cmds, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(cmds, "blue.md"), []byte("Switch to the blue file: $ARGUMENTS\n"), 0o644))
	out, _ := acptest.RunInteropScript(t, node, clientDir, "queue.mjs", workspace,
		[]string{"XDG_CONFIG_HOME=" + t.TempDir(), "OPENAI_API_KEY=test-key"},
		acpdBin, "--config", os.DevNull, "--provider", "openai", "--base-url", srv.BaseURL(), "--model", "scripted",
		"--data-dir", t.TempDir(), "--log-level", "warn")
	var sum struct {
		Runs map[string]struct {
			AgentMeta json.RawMessage `json:"agentMeta"`
			Answers   []struct {
				Label      string `json:"label"`
				StopReason string `json:"stopReason"`
				Error      string `json:"error"`
			} `json:"answers"`
		} `json:"runs"`
		SDKErrors []string `json:"sdkErrors"`
	}
	require.NoError(t, json.Unmarshal(out, &sum))
	assert.Empty(t, sum.SDKErrors)
	answers := func(run string) []string {
		var out []string
		for _, a := range sum.Runs[run].Answers {
			out = append(out, a.Label+":"+a.StopReason+a.Error)
		}
		return out
	}

	assert.JSONEq(t, `{"promptQueueing":true}`, string(sum.Runs["queued"].AgentMeta), "advertised in agentCapabilities._meta")
	assert.Equal(t, []string{"first:end_turn", "second:end_turn", "third:end_turn"}, answers("queued"),
		"queued prompts run in order, each to its end")
	reqs := requestsOf(srv, "QUEUE-queued")
	require.Len(t, reqs, 4)
	texts, _ := lastUser(reqs[2])
	assert.Equal(t, []string{"Switch to the blue file: queued"}, texts, "the queued slash command ran expanded, not as text")
	texts, _ = lastUser(reqs[3])
	assert.Equal(t, []string{"and the third"}, texts)
	for i := 1; i < len(reqs); i++ {
		assertCacheKept(t, reqs[i-1], reqs[i])
	}

	// Without the opt-in, each prompt cancels those before it (the second
	// may be cancelled before it ever ran, so the answers come in no fixed
	// order).
	assert.ElementsMatch(t, []string{"first:cancelled", "second:cancelled", "third:end_turn"}, answers("default"),
		"without the opt-in each prompt cancels the running one")
}
