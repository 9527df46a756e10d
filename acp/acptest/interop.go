package acptest

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/acpd/acpd/acp"
)

// InteropClient returns a folder holding dir's client scripts (*.mjs) and
// package.json next to a node_modules installed from dir's committed lock
// (NPMInstall): the official ACP TypeScript SDK, ready for `node client.mjs`.
func InteropClient(t testing.TB, npm, dir string) string {
	t.Helper()
	modules := NPMInstall(t, npm, dir, filepath.Join("@agentclientprotocol", "sdk", "package.json"),
		"ci", "--no-audit", "--no-fund", "--ignore-scripts")
	manifest, err := os.ReadFile(filepath.Join(dir, "package.json"))
	require.NoError(t, err)
	scripts, err := filepath.Glob(filepath.Join(dir, "*.mjs"))
	require.NoError(t, err)
	require.NotEmpty(t, scripts, "no client script in %s", dir)

	// ES modules ignore NODE_PATH; a node_modules link beside the script
	// makes the SDK resolvable while the install stays shared.
	out := t.TempDir()
	for _, p := range scripts {
		b, err := os.ReadFile(p)
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(filepath.Join(out, filepath.Base(p)), b, 0o644))
	}
	require.NoError(t, os.WriteFile(filepath.Join(out, "package.json"), manifest, 0o644))
	require.NoError(t, os.Symlink(modules, filepath.Join(out, "node_modules")))
	return out
}

// CheckWire replays a wire the interop client recorded (ACPD_INTEROP_WIRE:
// one {"dir":"client"|"agent","line":…} per line) through a Transcript:
// every line the agent wrote must validate against the ACP schema and the
// protocol's ordering rules. It returns the agent's lines.
func CheckWire(t testing.TB, path string) []string {
	t.Helper()
	v, err := DefaultValidator()
	require.NoError(t, err)
	return CheckWireWith(t, v, path)
}

// CheckWireWith is CheckWire against the schema of v (UnstableValidator
// for a wire using unstable methods).
func CheckWireWith(t testing.TB, v *Validator, path string) []string {
	t.Helper()
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	tr := NewTranscript(v)
	var agent []string
	for l := range bytes.SplitSeq(bytes.TrimSpace(data), []byte("\n")) {
		var rec struct {
			Dir  string `json:"dir"`
			Line string `json:"line"`
		}
		require.NoError(t, json.Unmarshal(l, &rec))
		if rec.Dir == "client" {
			tr.ClientLine([]byte(rec.Line))
			continue
		}
		agent = append(agent, rec.Line)
		assert.NoError(t, tr.AgentLine([]byte(rec.Line)), "agent line %s", rec.Line)
	}
	assert.NotEmpty(t, agent)
	return agent
}

// InteropSummary is the JSON line the interop client (client.mjs) prints.
type InteropSummary struct {
	Fatal      string `json:"fatal"`
	Initialize struct {
		ProtocolVersion int                 `json:"protocolVersion"`
		AgentInfo       *acp.Implementation `json:"agentInfo"`
	} `json:"initialize"`
	NewSession struct {
		SessionID     string `json:"sessionId"`
		CurrentModeID string `json:"currentModeId"`
	} `json:"newSession"`
	Steps             []InteropStep `json:"steps"`
	SDKErrors         []string      `json:"sdkErrors"`
	AvailableCommands [][]string    `json:"availableCommands"`
	Exit              struct {
		Code   *int    `json:"code"`
		Signal *string `json:"signal"`
		Error  string  `json:"error"`
	} `json:"exit"`
}

// InteropStep is one prompt of the interop client.
type InteropStep struct {
	Name            string            `json:"name"`
	StopReason      string            `json:"stopReason"`
	Error           *InteropError     `json:"error"`
	ToolCalls       int               `json:"toolCalls"`
	ToolCallUpdates int               `json:"toolCallUpdates"`
	Statuses        map[string]string `json:"statuses"`
	Failures        map[string]string `json:"failures"`
	Parents         map[string]string `json:"parents"`
	Permissions     []struct {
		ToolCallID  string   `json:"toolCallId"`
		Title       string   `json:"title"`
		OptionKinds []string `json:"optionKinds"`
	} `json:"permissions"`
	Text string `json:"text"`
	MS   int    `json:"ms"`
}

// InteropError is a prompt's error as the SDK reported it.
type InteropError struct {
	RequestError bool            `json:"requestError"`
	Code         int             `json:"code"`
	Message      string          `json:"message"`
	Data         json.RawMessage `json:"data"`
}

// FinalStatuses lists the step's tool calls' last statuses, in no order.
func (s InteropStep) FinalStatuses() []string {
	var out []string
	for _, st := range s.Statuses {
		out = append(out, st)
	}
	return out
}

// RunInteropClient runs the interop client of clientDir (InteropClient)
// with node: it opens a session in workspace on the agent started by the
// command line agent, with env added to this process's environment, and
// plays its steps. It fails t unless the client printed its summary with
// no fatal error and exited 0, and checks the wire it recorded
// (CheckWire), whose agent lines it returns with the summary. When t
// fails, the client's and the agent's stderr and the summary are logged.
func RunInteropClient(t testing.TB, node, clientDir, workspace string, env []string, agent ...string) (InteropSummary, []string) {
	t.Helper()
	out, lines := RunInteropScript(t, node, clientDir, "client.mjs", workspace, env, agent...)
	var sum InteropSummary
	require.NoError(t, json.Unmarshal(out, &sum), "summary from client.mjs:\n%s", out)
	require.Empty(t, sum.Fatal, "client.mjs failed")
	return sum, lines
}

// RunInteropScript is RunInteropClient for any script of clientDir: it
// returns the script's stdout (its one JSON summary line, which must have
// no "fatal" member) and the agent's lines of the wire, each checked
// against the schema and the protocol's rules (CheckWire). A script that
// opens further connections records them to ACPD_INTEROP_WIRE + ".2", ".3"
// …; each is checked as a connection of its own.
func RunInteropScript(t testing.TB, node, clientDir, script, workspace string, env []string, agent ...string) ([]byte, []string) {
	t.Helper()
	v, err := DefaultValidator()
	require.NoError(t, err)
	return RunInteropScriptWith(t, v, node, clientDir, script, workspace, env, agent...)
}

// RunInteropScriptWith is RunInteropScript with the wire checked against
// v's schema (UnstableValidator for a script using unstable methods).
func RunInteropScriptWith(t testing.TB, v *Validator, node, clientDir, script, workspace string, env []string, agent ...string) ([]byte, []string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, append([]string{filepath.Join(clientDir, script), workspace}, agent...)...)
	wire := filepath.Join(t.TempDir(), "wire.jsonl")
	cmd.Env = append(append(os.Environ(), env...), "ACPD_INTEROP_WIRE="+wire)
	var stdout bytes.Buffer
	stderr := &SyncBuffer{}
	cmd.Stdout, cmd.Stderr = &stdout, stderr
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("%s summary: %s\nstderr:\n%s", script, bytes.TrimSpace(stdout.Bytes()), stderr.String())
		}
	})
	runErr := cmd.Run()
	out := bytes.TrimSpace(stdout.Bytes())
	var head struct {
		Fatal string `json:"fatal"`
	}
	require.NoError(t, json.Unmarshal(out, &head), "summary from %s (run error: %v):\n%s", script, runErr, out)
	require.Empty(t, head.Fatal, "%s failed", script)
	require.NoError(t, runErr)
	lines := CheckWireWith(t, v, wire)
	// A script that opens more connections than one records each further
	// one beside the first, as wire.jsonl.2, .3, …: each is a connection
	// of its own to the protocol's rules.
	more, err := filepath.Glob(wire + ".*")
	require.NoError(t, err)
	for _, p := range more {
		CheckWireWith(t, v, p)
	}
	return out, lines
}
