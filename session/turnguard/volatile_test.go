package turnguard

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// recordedAt is when the codex-acp frames below were recorded
// (started_at_ms 1796150358206).
var recordedAt = time.UnixMilli(1796150358206)

// Frames as codex-acp 0.16.0 sent them in front of acpd guard (guard.md,
// "Measured in front of acpd guard"): two identical `ls` calls of one turn,
// 4 s apart. Only the per-call values differ.
var codexFrames = []string{
	`{"sessionUpdate":"tool_call","toolCallId":"call_1_0_0","title":"List /tmp/ws","kind":"search","status":"in_progress","rawInput":{"call_id":"call_1_0_0","process_id":"27322","turn_id":"01a2c6f0-3b7e-7d21-9c4e-58f1a0b2c3d4","started_at_ms":1796150358206,"command":["/bin/bash","-lc","ls"],"cwd":"/tmp/ws","parsed_cmd":[{"type":"list_files","cmd":"ls","path":null}],"source":"unified_exec_startup"}}`,
	`{"sessionUpdate":"tool_call","toolCallId":"call_2_0_0","title":"List /tmp/ws","kind":"search","status":"in_progress","rawInput":{"call_id":"call_2_0_0","process_id":"27351","turn_id":"01a2c6f0-3b7e-7d21-9c4e-58f1a0b2c3d4","started_at_ms":1796150362418,"command":["/bin/bash","-lc","ls"],"cwd":"/tmp/ws","parsed_cmd":[{"type":"list_files","cmd":"ls","path":null}],"source":"unified_exec_startup"}}`,
}

// Frames as claude-agent-acp 0.23.1 sent them for one Bash call: the
// placeholder, the status-less update with the full input, then running
// and done.
var claudeFrames = []string{
	`{"sessionUpdate":"tool_call","toolCallId":"toolu_01Xk","title":"Terminal","kind":"execute","status":"pending","rawInput":{},"_meta":{"claudeCode":{"toolName":"Bash"}}}`,
	`{"sessionUpdate":"tool_call_update","toolCallId":"toolu_01Xk","title":"` + "`ls`" + `","rawInput":{"command":"ls","description":"List files"},"_meta":{"claudeCode":{"toolName":"Bash"}}}`,
	`{"sessionUpdate":"tool_call_update","toolCallId":"toolu_01Xk","status":"in_progress","_meta":{"claudeCode":{"toolName":"Bash"}}}`,
	`{"sessionUpdate":"tool_call_update","toolCallId":"toolu_01Xk","status":"completed","content":[{"type":"content","content":{"type":"text","text":"a.txt\nb.txt"}}],"_meta":{"claudeCode":{"toolName":"Bash"}}}`,
}

func decodeFrame(t *testing.T, line string) Frame {
	t.Helper()
	var u struct {
		ToolCallID string          `json:"toolCallId"`
		Title      string          `json:"title"`
		Kind       string          `json:"kind"`
		Status     string          `json:"status"`
		RawInput   json.RawMessage `json:"rawInput"`
		Meta       json.RawMessage `json:"_meta"`
	}
	require.NoError(t, json.Unmarshal([]byte(line), &u))
	return Frame{ToolCallID: u.ToolCallID, Title: u.Title, Kind: u.Kind, Status: u.Status, RawInput: u.RawInput, Meta: u.Meta}
}

// TestRecordedCodexFramesKeyAlike: codex-acp's identical calls get one key
// once its per-call values are dropped; what is left is the command.
func TestRecordedCodexFramesKeyAlike(t *testing.T) {
	t.Parallel()
	o := NewObserver()
	o.Now = func() time.Time { return recordedAt }
	var keys []string
	for _, line := range codexFrames {
		ev := o.Observe(decodeFrame(t, line))
		require.True(t, ev.Final, "in_progress: the key is final")
		keys = append(keys, ev.Call.Key)
	}
	assert.Equal(t, keys[0], keys[1])
	assert.Equal(t, `{"command":["/bin/bash","-lc","ls"],"cwd":"/tmp/ws","parsed_cmd":[{"cmd":"ls","path":null,"type":"list_files"}],"source":"unified_exec_startup"}`,
		string(o.Get("call_1_0_0").Input))

	// Replayed a day later the stamps are no longer "now": kept, so the
	// calls stay distinct (a late stop, never a false one).
	late := NewObserver()
	late.Now = func() time.Time { return recordedAt.Add(24 * time.Hour) }
	a := late.Observe(decodeFrame(t, codexFrames[0])).Call.Key
	b := late.Observe(decodeFrame(t, codexFrames[1])).Call.Key
	assert.NotEqual(t, a, b)
}

// TestRecordedClaudeFramesKeyOnFullInput: the status-less update's input
// replaces the placeholder before the key is final.
func TestRecordedClaudeFramesKeyOnFullInput(t *testing.T) {
	t.Parallel()
	o := NewObserver()
	ev := o.Observe(decodeFrame(t, claudeFrames[0]))
	require.True(t, ev.New)
	assert.False(t, ev.Call.HasInput(), "{} is a placeholder")
	ev = o.Observe(decodeFrame(t, claudeFrames[1]))
	assert.False(t, ev.Final, "no status: not final yet")
	assert.True(t, ev.Call.HasInput())
	ev = o.Observe(decodeFrame(t, claudeFrames[2]))
	require.True(t, ev.Final)
	assert.Equal(t, "Bash", ev.Call.Name)
	assert.Equal(t, `{"command":"ls","description":"List files"}`, string(ev.Call.Input))
}

// TestVolatileRule: each rule on its own, and the arguments it must keep.
func TestVolatileRule(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 12, 1, 21, 0, 0, 0, time.UTC)
	ms := func(d time.Duration) int64 { return now.Add(d).UnixMilli() }
	tests := []struct {
		name, in, want string
	}{
		{"own id by value", `{"ref":"c9","x":1}`, `{"x":1}`},
		{"own id in a list", `{"ids":["c9","k"]}`, `{"ids":["k"]}`},
		{"call_id", `{"call_id":"zz","x":1}`, `{"x":1}`},
		{"toolCallId camel", `{"toolCallId":"zz","x":1}`, `{"x":1}`},
		{"tool_use_id", `{"tool_use_id":"toolu_1","x":1}`, `{"x":1}`},
		{"turnID upper", `{"turnID":"t","x":1}`, `{"x":1}`},
		{"process_id number", `{"process_id":27322,"x":1}`, `{"x":1}`},
		{"pid", `{"pid":"900","x":1}`, `{"x":1}`},
		{"execution_id nested", `{"meta":{"execution_id":"e1"},"x":1}`, `{"meta":{},"x":1}`},
		{"started_at_ms now", `{"started_at_ms":` + jsonInt(ms(0)) + `,"x":1}`, `{"x":1}`},
		{"seconds now", `{"ts":` + jsonInt(now.Unix()) + `,"x":1}`, `{"x":1}`},
		{"micros now", `{"createdAtUs":` + jsonInt(now.UnixMicro()) + `,"x":1}`, `{"x":1}`},
		{"nanos now", `{"timestamp":` + jsonInt(now.UnixNano()) + `,"x":1}`, `{"x":1}`},
		{"digits as text", `{"sent_at":"` + jsonInt(ms(-time.Minute)) + `","x":1}`, `{"x":1}`},
		{"rfc3339 now", `{"requestedAt":"2026-12-01T21:03:04.123Z","x":1}`, `{"x":1}`},

		// Kept: a model's own ids and times.
		{"message_id", `{"message_id":"m1"}`, ``},
		{"run_id", `{"run_id":"r1"}`, ``},
		{"issue id", `{"id":42}`, ``},
		{"request_id", `{"request_id":"q"}`, ``},
		{"since an hour ago", `{"since_ms":` + jsonInt(ms(-time.Hour)) + `}`, ``},
		{"a date far off", `{"created_at":"2024-01-01T00:00:00Z"}`, ``},
		{"now under a plain name", `{"value":` + jsonInt(ms(0)) + `}`, ``},
		{"a short number", `{"timeout_ms":30000}`, ``},
		{"call_id holding an object", `{"call_id":{"a":1}}`, ``},
		{"bool pid", `{"pid":true}`, ``},
		{"not an object", `"ls"`, ``},
		{"not JSON", `ls -la`, ``},
	}
	for _, tt := range tests {
		got := string(dropVolatile(json.RawMessage(tt.in), "c9", now))
		want := tt.want
		if want == "" {
			want = tt.in
		}
		assert.Equal(t, want, got, tt.name)
	}
}

func jsonInt(n int64) string { b, _ := json.Marshal(n); return string(b) }

func TestNameWords(t *testing.T) {
	t.Parallel()
	for in, want := range map[string][]string{
		"started_at_ms": {"started", "at", "ms"},
		"startedAtMs":   {"started", "at", "ms"},
		"toolCallID":    {"tool", "call", "id"},
		"x-request.id":  {"x", "request", "id"},
		"pid":           {"pid"},
		"__":            nil,
	} {
		assert.Equal(t, want, nameWords(in), in)
	}
}

// TestRecordedCodexResultsAlike: codex-acp 0.16.0 reports an exec's result
// only in rawOutput, stamped with the call's ids, completed_at_ms and its
// duration; two identical `ls` runs digest alike, a different output does
// not.
func TestRecordedCodexResultsAlike(t *testing.T) {
	t.Parallel()
	out := func(id, pid string, at int64, nanos int, stdout string) string {
		return fmt.Sprintf(`{"sessionUpdate":"tool_call_update","toolCallId":%q,"status":"completed","rawOutput":{"aggregated_output":%q,"call_id":%q,"command":["/bin/bash","-lc","ls"],"completed_at_ms":%d,"cwd":"/tmp/ws","duration":{"nanos":%d,"secs":0},"exit_code":0,"formatted_output":%q,"parsed_cmd":[{"cmd":"ls","path":null,"type":"list_files"}],"process_id":%q,"source":"unified_exec_startup","status":"completed","stderr":"","stdout":%q,"turn_id":"01a233ab-3369-70d3-ad29-8a340beb9097"}}`,
			id, stdout, id, at, nanos, stdout, pid, stdout)
	}
	o := NewObserver()
	o.Now = func() time.Time { return recordedAt }
	digest := func(id, pid string, at int64, nanos int, stdout string) uint64 {
		f := decodeFrame(t, out(id, pid, at, nanos, stdout))
		var raw struct {
			RawOutput json.RawMessage `json:"rawOutput"`
		}
		require.NoError(t, json.Unmarshal([]byte(out(id, pid, at, nanos, stdout)), &raw))
		f.RawOutput = raw.RawOutput
		ev := o.Observe(f)
		require.Equal(t, "completed", ev.Ended)
		h, ok := o.Result(ev.Call, false)
		require.True(t, ok, "rawOutput is a result")
		return h
	}
	a := digest("call_1", "74472", recordedAt.UnixMilli(), 18346, "target.txt\n")
	b := digest("call_2", "31172", recordedAt.UnixMilli()+470, 16929, "target.txt\n")
	c := digest("call_3", "31175", recordedAt.UnixMilli()+900, 16000, "target.txt\nnew.txt\n")
	assert.Equal(t, a, b)
	assert.NotEqual(t, a, c)
}
