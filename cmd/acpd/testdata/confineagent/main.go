// Command confineagent is a minimal ACP agent for the test of acpd guard
// --confine: each prompt turn tries what a steered agent might (write
// outside its workspace, read the user's SSH key, look for secrets in its
// environment), does an ordinary write in its workspace, reports each
// outcome as agent text and ends the turn with end_turn.
//
// Built by the test (go build); a directory under testdata is no package
// of the module.
package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

type message struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id,omitempty"`
	Method  string          `json:"method,omitempty"`
	Params  json.RawMessage `json:"params,omitempty"`
	Result  any             `json:"result,omitempty"`
}

func main() {
	in := bufio.NewScanner(os.Stdin)
	in.Buffer(make([]byte, 1<<20), 1<<20)
	out := json.NewEncoder(os.Stdout)
	send := func(m message) {
		m.JSONRPC = "2.0"
		_ = out.Encode(m)
	}
	for in.Scan() {
		var m message
		if err := json.Unmarshal(in.Bytes(), &m); err != nil || m.ID == nil {
			continue // notifications (session/cancel) and answers
		}
		switch m.Method {
		case "initialize":
			send(message{ID: m.ID, Result: map[string]any{"protocolVersion": 1,
				"agentInfo": map[string]any{"name": "confine-agent", "version": "1"}, "agentCapabilities": map[string]any{}}})
		case "session/new":
			send(message{ID: m.ID, Result: map[string]any{"sessionId": "s1"}})
		case "session/prompt":
			for _, line := range attempts() {
				params, _ := json.Marshal(map[string]any{"sessionId": "s1", "update": map[string]any{
					"sessionUpdate": "agent_message_chunk", "content": map[string]any{"type": "text", "text": line + "\n"}}})
				send(message{Method: "session/update", Params: params})
			}
			send(message{ID: m.ID, Result: map[string]any{"stopReason": "end_turn"}})
		default:
			_ = out.Encode(map[string]any{"jsonrpc": "2.0", "id": m.ID, "error": map[string]any{"code": -32601, "message": "method not found"}})
		}
	}
}

// attempts does the turn's work, one line per attempt: "NAME: ok" or
// "NAME: failed: ERROR".
func attempts() []string {
	outcome := func(name string, err error) string {
		if err != nil {
			return name + ": failed: " + err.Error()
		}
		return name + ": ok"
	}
	home, _ := os.UserHomeDir()
	cwd, _ := os.Getwd()
	var lines []string
	lines = append(lines, outcome("write-outside", os.WriteFile(filepath.Join(os.Getenv("CONFINE_OUTSIDE"), "escaped.txt"), []byte("x"), 0o644)))
	_, err := os.ReadFile(filepath.Join(home, ".ssh", "id_rsa"))
	lines = append(lines, outcome("read-ssh-key", err))
	lines = append(lines, outcome("write-workspace", os.WriteFile(filepath.Join(cwd, "made-by-agent.txt"), []byte("ok"), 0o644)))
	var seen []string
	for _, kv := range os.Environ() {
		if strings.Contains(kv, "secret-value") {
			name, _, _ := strings.Cut(kv, "=")
			seen = append(seen, name)
		}
	}
	lines = append(lines, fmt.Sprintf("secrets-in-env: %s", strings.Join(seen, ",")))
	return lines
}
