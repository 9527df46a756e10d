package acptest

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// InteropClient returns a folder holding dir's client.mjs and package.json
// next to a node_modules installed from dir's committed lock (NPMInstall):
// the official ACP TypeScript SDK, ready for `node client.mjs`.
func InteropClient(t testing.TB, npm, dir string) string {
	t.Helper()
	modules := NPMInstall(t, npm, dir, filepath.Join("@agentclientprotocol", "sdk", "package.json"),
		"ci", "--no-audit", "--no-fund", "--ignore-scripts")
	manifest, err := os.ReadFile(filepath.Join(dir, "package.json"))
	require.NoError(t, err)
	client, err := os.ReadFile(filepath.Join(dir, "client.mjs"))
	require.NoError(t, err)

	// ES modules ignore NODE_PATH; a node_modules link beside the script
	// makes the SDK resolvable while the install stays shared.
	out := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(out, "client.mjs"), client, 0o644))
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
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	v, err := DefaultValidator()
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
