package main

import (
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestStartupFloorBuild: the benchmark's -tags startupfloor build answers
// like the floor program when run without arguments, and is acpd with one.
func TestStartupFloorBuild(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	t.Parallel()
	bin := filepath.Join(t.TempDir(), "acpd-startupfloor")
	build := exec.CommandContext(t.Context(), "go", "build", "-tags", "startupfloor", "-o", bin, ".")
	out, err := build.CombinedOutput()
	require.NoError(t, err, string(out))

	floor := exec.CommandContext(t.Context(), bin)
	floor.Stdin = strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":1}}` + "\n")
	out, err = floor.Output()
	require.NoError(t, err)
	assert.Equal(t, `{"jsonrpc":"2.0","id":1,"result":{"protocolVersion":1}}`+"\n", string(out))

	version := exec.CommandContext(t.Context(), bin, "--version")
	out, err = version.Output()
	require.NoError(t, err)
	assert.True(t, strings.HasPrefix(string(out), "acpd "), "with an argument it is acpd: %q", out)
}
