package main

import (
	"os/exec"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestSandboxHelper_SkipsStartup: `acpd __sandbox-exec` is served from the
// init of package sandbox/helper, before the initialization of the rest of
// acpd (the session store, the context manager, gRPC and OpenTelemetry all
// do work in init), so a confined command does not pay it. GODEBUG=inittrace
// lists each package initialized before the helper exec'd the command.
func TestSandboxHelper_SkipsStartup(t *testing.T) {
	t.Parallel()
	bin := acpdBinary(t)
	ws := t.TempDir()
	cmd := exec.Command(bin, "__sandbox-exec", "--rw", ws, "--", "/bin/sh", "-c", "echo helper-ran")
	cmd.Env = append(cmd.Environ(), "GODEBUG=inittrace=1")
	out, err := cmd.CombinedOutput()
	trace := string(out)
	assert.Contains(t, trace, "init runtime @", "inittrace works")
	assert.NotContains(t, trace, "init github.com/acpd/acpd/session/tools @", "the helper skipped acpd's own init")
	assert.NotContains(t, trace, "init github.com/acpd/acpd/config @")
	if err == nil {
		assert.Contains(t, trace, "helper-ran")
	} else {
		// No usable Landlock here: the helper refused, still from init.
		var ee *exec.ExitError
		require.ErrorAs(t, err, &ee)
		assert.Equal(t, 125, ee.ExitCode())
		assert.True(t, strings.Contains(trace, "acpd-sandbox: sandbox unavailable"), trace)
	}

	full := exec.Command(bin, "--version")
	full.Env = cmd.Env
	out, err = full.CombinedOutput()
	require.NoError(t, err)
	assert.Contains(t, string(out), "init github.com/acpd/acpd/session/tools @", "the rest of acpd does pay it")
}
