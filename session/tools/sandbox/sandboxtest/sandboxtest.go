// Package sandboxtest holds what the sandbox's tests share.
package sandboxtest

import (
	"crypto/rand"
	"fmt"
	"os"
	"os/exec"
	"strings"
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

// PublicAddr adds to this machine's loopback interface an address that
// acpd's network guard takes for the internet's (one of TEST-NET-2,
// 198.51.100.0/24, reserved for documentation) and returns it, removed
// when t ends: a server listening on all addresses is then reachable there
// as a "public host" without a network, which the sandbox proxy's tests
// need (a name resolving to loopback is refused as private). It needs root
// (CAP_NET_ADMIN) and iproute2; otherwise t is skipped, or fails under
// ACPD_REQUIRE_SANDBOX=1 when it is root.
func PublicAddr(t testing.TB) string {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("SKIPPED: adding a test address to the loopback interface needs root")
	}
	ip, err := exec.LookPath("ip")
	if err != nil {
		if os.Getenv(RequireEnv) == "1" {
			t.Fatalf("%s=1, but iproute2's ip is not installed: %v", RequireEnv, err)
		}
		t.Skipf("SKIPPED: iproute2's ip is not installed: %v", err)
	}
	var b [1]byte
	_, _ = rand.Read(b[:])
	addr := fmt.Sprintf("198.51.100.%d", 10+int(b[0])%240)
	if out, err := exec.Command(ip, "addr", "add", addr+"/32", "dev", "lo").CombinedOutput(); err != nil && !strings.Contains(string(out), "exists") {
		t.Fatalf("ip addr add %s/32 dev lo: %v: %s", addr, err, out)
	}
	t.Cleanup(func() { _ = exec.Command(ip, "addr", "del", addr+"/32", "dev", "lo").Run() })
	return addr
}
