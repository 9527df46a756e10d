package session_test

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/acpd/acpd/acp/acptest"
	"github.com/acpd/acpd/session/model/modeltest"
)

// capsUpdate is one session/update as capable.mjs records it.
type capsUpdate struct {
	Step         string `json:"step"`
	Kind         string `json:"kind"`
	ToolCallID   string `json:"toolCallId"`
	Name         string `json:"name"`
	Status       string `json:"status"`
	CompactionID string `json:"compactionId"`
	Severity     string `json:"severity"`
	Title        string `json:"title"`
	Description  string `json:"description"`
	Text         string `json:"text"`
	MessageID    string `json:"messageId"`
}

type capsSummary struct {
	Entry        string       `json:"entry"`
	Updates      []capsUpdate `json:"updates"`
	Elicitations []struct {
		Step   string          `json:"step"`
		Params json.RawMessage `json:"params"`
	} `json:"elicitations"`
	Steps []struct {
		Name       string          `json:"name"`
		StopReason string          `json:"stopReason"`
		Error      json.RawMessage `json:"error"`
	} `json:"steps"`
	SDKErrors []string `json:"sdkErrors"`
}

// TestInterop_Capabilities drives the built acpd with the official
// TypeScript SDK client (its stable and its /unstable entry point)
// advertising session.notices, session.compaction and elicitation.form,
// and once advertising none of them; every line acpd writes is checked
// against the schema and the protocol's rules, capability gating
// included. With the capabilities: a broken agent file is a warning
// notice; the model's ask_user_question is an elicitation/create whose
// answer the model receives; each compaction is a compaction_update
// in_progress → completed with its summary as compaction_summary_chunks,
// and session/load replays them at their place; every tool_call has its
// name. Without: none of the new updates or requests, the compaction is the
// think tool call it always was, and ask_user_question is not offered.
func TestInterop_Capabilities(t *testing.T) {
	node, npm := acptest.NodeAndNPM(t, "the capability interop test")
	clientDir := acptest.InteropClient(t, npm, interopDir)
	for _, tc := range []struct{ name, entry, caps string }{
		{"stable", "@agentclientprotocol/sdk", "all"},
		{"unstable", "@agentclientprotocol/sdk/unstable", "all"},
		{"without capabilities", "@agentclientprotocol/sdk", "none"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			const reads = 4
			const window = 24000
			workspace := t.TempDir()
			agentsDir := filepath.Join(workspace, ".claude", "agents")
			require.NoError(t, os.MkdirAll(agentsDir, 0o755))
			require.NoError(t, os.WriteFile(filepath.Join(agentsDir, "broken.md"), []byte("---\nname: broken\n---\nno description\n"), 0o644))
			ask := `{"questions":[{"question":"Which database should the service use?","header":"Database","options":[{"label":"Postgres"},{"label":"SQLite"}]}]}`
			srv := modeltest.NewServer(t,
				modeltest.Response{ToolCalls: []modeltest.ToolCall{{ID: "call_ask", Name: "ask_user_question", Arguments: ask}}},
				modeltest.Response{Text: "Postgres it is."},
			)
			srv.SetResponder(summariser)
			for i := range reads {
				p := filepath.Join(workspace, fmt.Sprintf("src_%03d.go", i))
				require.NoError(t, os.WriteFile(p, []byte(sourceFile(i)), 0o644))
				srv.Add(modeltest.Response{ToolCalls: []modeltest.ToolCall{readCall(p)}},
					modeltest.Response{Text: fmt.Sprintf("File %d defines step functions.", i)})
			}
			out, lines := acptest.RunInteropScript(t, node, clientDir, "capable.mjs", workspace,
				[]string{"XDG_CONFIG_HOME=" + t.TempDir(), "OPENAI_API_KEY=test-key", "ACPD_CAPS=" + tc.caps, "ACPD_SDK_ENTRY=" + tc.entry, fmt.Sprintf("ACPD_READS=%d", reads)},
				acpdBin, "--config", os.DevNull, "--provider", "openai", "--base-url", srv.BaseURL(), "--model", "scripted",
				"--data-dir", t.TempDir(), "--log-level", "warn", "--approval-mode", "yolo", "--context-window", fmt.Sprint(window))
			var sum capsSummary
			require.NoError(t, json.Unmarshal(out, &sum))
			assert.Equal(t, tc.entry, sum.Entry)
			assert.Empty(t, sum.SDKErrors, "the SDK rejected lines acpd wrote")
			require.Len(t, sum.Steps, reads+2)
			for _, s := range sum.Steps {
				assert.Equal(t, "end_turn", s.StopReason, "step %s: %s", s.Name, s.Error)
			}

			// Every chunk of a message, live and replayed, carries its
			// messageId; a model response's chunks share one.
			ids := map[string]map[string]bool{}
			for _, u := range sum.Updates {
				switch u.Kind {
				case "user_message_chunk", "agent_message_chunk", "agent_thought_chunk":
					assert.NotEmpty(t, u.MessageID, "%s of %s without messageId", u.Kind, u.Step)
					if ids[u.Step] == nil {
						ids[u.Step] = map[string]bool{}
					}
					ids[u.Step][u.MessageID] = true
				}
			}
			assert.Len(t, ids["ask"], 1, "the ask turn's one answer is one message")

			// Every tool_call, live and replayed, carries its name.
			names := map[string]bool{}
			for _, u := range sum.Updates {
				if u.Kind == "tool_call" {
					assert.NotEmpty(t, u.Name, "tool_call %s (%s) without name", u.ToolCallID, u.Step)
					names[u.Name] = true
				}
			}
			assert.True(t, names["ask_user_question"] && names["read_file"], "names %v", names)

			offered := map[string]bool{}
			for _, tl := range srv.Requests()[0].Tools {
				offered[tl.Function.Name] = true
			}
			var toolText string
			for _, r := range srv.Requests() {
				for _, m := range r.Messages {
					if m.Role == "tool" && m.ToolCallID == "call_ask" {
						toolText = m.Text()
					}
				}
			}
			wireText := strings.Join(lines, "\n")
			if tc.caps == "none" {
				assert.False(t, offered["ask_user_question"], "not offered without elicitation")
				assert.Empty(t, sum.Elicitations)
				for _, k := range []string{`"notice"`, `"compaction_update"`, `"compaction_summary_chunk"`, `"elicitation/create"`} {
					assert.NotContains(t, wireText, k, "a client without the capability")
				}
				assert.True(t, names["compact"], "the compaction is the think tool call")
				return
			}
			assert.True(t, offered["ask_user_question"])

			// The broken agent file: a warning notice.
			var notices []capsUpdate
			for _, u := range sum.Updates {
				if u.Kind == "notice" {
					notices = append(notices, u)
				}
			}
			require.NotEmpty(t, notices)
			assert.Equal(t, "warning", notices[0].Severity)
			assert.Equal(t, "Agent file problem", notices[0].Title)
			assert.Contains(t, notices[0].Description, filepath.Join(agentsDir, "broken.md")+`:1: missing the required key "description"`)

			// The question: an elicitation/create whose answer the model got.
			require.Len(t, sum.Elicitations, 1)
			var el struct {
				SessionID, ToolCallID, Mode, Message string
			}
			require.NoError(t, json.Unmarshal(sum.Elicitations[0].Params, &el))
			assert.Equal(t, "form", el.Mode)
			assert.Equal(t, "call_ask", el.ToolCallID)
			assert.Equal(t, "Which database should the service use?", el.Message)
			assert.Contains(t, toolText, "Answer: Postgres")

			// Compactions: live, then replayed by session/load in the same
			// shape, and never as tool calls.
			assert.False(t, names["compact"], "no compaction tool call for a client with session.compaction")
			live, replayed := compactions(t, sum.Updates, false), compactions(t, sum.Updates, true)
			require.NotEmpty(t, live, "the long session was compacted")
			summarised := false
			for id, c := range live {
				assert.Equal(t, []string{"in_progress", "completed"}, c.statuses, "compaction %s", id)
				assert.NotEmpty(t, c.summary, "compaction %s has summary chunks", id)
				summarised = summarised || strings.Contains(c.summary, "as discussed so far")
				assert.Equal(t, c, replayed[id], "compaction %s replayed as it happened", id)
			}
			assert.Equal(t, len(live), len(replayed))
			assert.True(t, summarised, "one compaction streamed the model's summary: %v", live)
			t.Logf("%d compactions, %d notices, tool names %v", len(live), len(notices), names)
		})
	}
}

type compactionSeen struct {
	statuses []string
	summary  string
}

// compactions gathers each compaction's statuses and summary text, from the
// live steps or from the load's replay; a chunk must come after its
// in_progress update and before its completed one.
func compactions(t *testing.T, us []capsUpdate, replay bool) map[string]compactionSeen {
	out := map[string]compactionSeen{}
	for _, u := range us {
		if (u.Step == "load") != replay {
			continue
		}
		switch u.Kind {
		case "compaction_update":
			c := out[u.CompactionID]
			c.statuses = append(c.statuses, u.Status)
			out[u.CompactionID] = c
		case "compaction_summary_chunk":
			c := out[u.CompactionID]
			assert.Equal(t, []string{"in_progress"}, c.statuses, "chunk of %s outside in_progress", u.CompactionID)
			c.summary += u.Text
			out[u.CompactionID] = c
		}
	}
	return out
}
