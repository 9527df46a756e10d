package turnguard

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/acpd/acpd/loopdetect"
)

func raw(s string) json.RawMessage { return json.RawMessage(s) }

// TestObserverNames: the tool name comes from the standard name, then the
// known _meta fields, then an id built from it, then the title's first
// word, then the kind.
func TestObserverNames(t *testing.T) {
	t.Parallel()
	tests := []struct {
		f    Frame
		want string
	}{
		{Frame{ToolCallID: "a", Name: "Bash", Meta: raw(`{"toolName":"other"}`), Status: "completed"}, "Bash"},
		{Frame{ToolCallID: "b", Meta: raw(`{"toolName":"read_file"}`), Title: "ReadFile: x", Status: "completed"}, "read_file"},
		{Frame{ToolCallID: "c", Meta: raw(`{"claudeCode":{"toolName":"Read"}}`), Title: "Read File", Status: "completed"}, "Read"},
		{Frame{ToolCallID: "d", Meta: raw(`{"goose":{"toolCall":{"toolName":"developer__shell"}}}`), Status: "completed"}, "developer__shell"},
		{Frame{ToolCallID: "read_file__call_1_0_0", Title: "files/same.txt", Status: "in_progress"}, "read_file"},
		{Frame{ToolCallID: "run_shell_command-1712345678901-3", Title: "ls -la", Status: "completed"}, "run_shell_command"},
		{Frame{ToolCallID: "call_abc", Title: "bash", Status: "completed"}, "bash"},
		{Frame{ToolCallID: "e", Title: "Search: foo", Status: "completed"}, "Search"},
		{Frame{ToolCallID: "f", Kind: "fetch", Status: "completed"}, "fetch"},
		{Frame{ToolCallID: "g", Status: "completed"}, UnknownTool},
	}
	for _, tt := range tests {
		o := NewObserver()
		ev := o.Observe(tt.f)
		require.True(t, ev.Final, tt.f.ToolCallID)
		assert.Equal(t, tt.want, ev.Call.Name, tt.f.ToolCallID)
	}
}

// TestObserverKeys: the key is the first complete input, volatile fields
// dropped; a call without input falls back to kind, locations and title.
func TestObserverKeys(t *testing.T) {
	t.Parallel()
	key := func(name, args string) string {
		k, err := loopdetect.ToolCallRepeatKeyJSON(name, []byte(args))
		require.NoError(t, err)
		return k
	}
	o := NewObserver()
	ev := o.Observe(Frame{ToolCallID: "1", Name: "bash", Status: "pending", RawInput: raw(`{"cwd":"/w"}`)})
	assert.True(t, ev.New)
	assert.False(t, ev.Final, "a pending call's input may still grow")
	ev = o.Observe(Frame{ToolCallID: "1", Status: "pending", RawInput: raw(`{}`)})
	assert.False(t, ev.New, "an upsert")
	ev = o.Observe(Frame{ToolCallID: "1", Status: "in_progress", RawInput: raw(`{"command":"ls","cwd":"/w"}`)})
	require.True(t, ev.Final)
	assert.Equal(t, key("bash", `{"command":"ls","cwd":"/w"}`), ev.Call.Key)
	ev = o.Observe(Frame{ToolCallID: "1", Status: "completed", RawInput: raw(`{"command":"rm"}`)})
	assert.False(t, ev.Final)
	assert.Equal(t, "completed", ev.Ended)
	assert.Equal(t, key("bash", `{"command":"ls","cwd":"/w"}`), o.Get("1").Key, "a final key never changes")

	ev = o.Observe(Frame{ToolCallID: "c9", Name: "shell", Status: "in_progress",
		RawInput: raw(`{"command":["ls"],"call_id":"c9","turn_id":"t1","process_id":77,"nested":{"callId":"x","ref":"c9"},"ids":["c9","k"]}`)})
	assert.Equal(t, `{"command":["ls"],"ids":["k"],"nested":{}}`, string(ev.Call.Input))
	assert.Equal(t, key("shell", `{"command":["ls"],"ids":["k"],"nested":{}}`), ev.Call.Key)

	ev = o.Observe(Frame{ToolCallID: "p", Title: "files/a.txt", Kind: "read", Locations: raw(`[{"path":"/w/a.txt"}]`), Permission: true})
	require.True(t, ev.Final, "the permission request is the last moment to decide")
	assert.Equal(t, `{"kind":"read","locations":[{"path":"/w/a.txt"}],"title":"files/a.txt"}`, string(ev.Call.Input))
	assert.Equal(t, key("files/a.txt", string(ev.Call.Input)), ev.Call.Key)
}

// TestObserverReady: calls are released for the transcript in the order
// they were first seen, each once its key is final.
func TestObserverReady(t *testing.T) {
	t.Parallel()
	o := NewObserver()
	o.Observe(Frame{ToolCallID: "a", Title: "x", Status: "pending"})
	o.Observe(Frame{ToolCallID: "b", Title: "y", Status: "completed"})
	assert.Empty(t, o.Ready(), "b waits for a")
	o.Observe(Frame{ToolCallID: "a", Status: "in_progress"})
	got := o.Ready()
	require.Len(t, got, 2)
	assert.Equal(t, "a", got[0].ID)
	assert.Equal(t, "b", got[1].ID)
	o.Observe(Frame{ToolCallID: "c", Title: "z", Status: "pending"})
	assert.Empty(t, o.Ready())
	assert.Len(t, o.FinalizeAll(), 1)
	assert.Len(t, o.Ready(), 1)
	assert.Equal(t, Event{}, o.Observe(Frame{Title: "no id"}))
}
