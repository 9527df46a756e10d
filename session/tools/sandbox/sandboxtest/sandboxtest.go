// Package sandboxtest holds what the sandbox's tests share.
package sandboxtest

import (
	"os"
	"testing"

	"github.com/acpd/acpd/session/tools/sandbox"
)

// RequireEnv makes a machine without a usable Landlock a test failure
// instead of a skip; .ci/run sets it, since CI machines have Landlock.
const RequireEnv = "ACPD_REQUIRE_SANDBOX"

// Require skips t, saying why, when this machine cannot confine commands
// (no Landlock, or an ABI below sandbox.MinABI); under ACPD_REQUIRE_SANDBOX=1
// it fails t instead.
func Require(t testing.TB) sandbox.Status {
	t.Helper()
	st := sandbox.Probe()
	if st.Usable() {
		return st
	}
	if os.Getenv(RequireEnv) == "1" {
		t.Fatalf("%s=1, but this machine cannot run the shell sandbox: %v", RequireEnv, st.Err)
	}
	t.Skipf("SKIPPED: this machine cannot run the shell sandbox (%v); set %s=1 to make this a failure", st.Err, RequireEnv)
	return st
}

// RequirePrivateShm is Require, and skips (or fails, under
// ACPD_REQUIRE_SANDBOX=1) unless the sandbox helper gives each session a
// private /dev/shm on this machine (user and mount namespaces).
func RequirePrivateShm(t testing.TB, helper string) sandbox.Status {
	t.Helper()
	st := Require(t)
	p := &sandbox.Policy{Mode: sandbox.ModeRequired, Helper: helper, TempRoot: t.TempDir()}
	if err := p.PrivateShm(); err != nil {
		if os.Getenv(RequireEnv) == "1" {
			t.Fatalf("%s=1, but this machine gives commands no private /dev/shm: %v", RequireEnv, err)
		}
		t.Skipf("SKIPPED: this machine gives commands no private /dev/shm (%v); set %s=1 to make this a failure", err, RequireEnv)
	}
	return st
}
