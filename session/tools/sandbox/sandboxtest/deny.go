package sandboxtest

import (
	"os"
	"strings"
	"testing"

	"github.com/acpd/acpd/session/tools/sandbox"
)

// Denial is what Deny takes away: reading the files in Read, writing in the
// folders in Write (creating, removing, renaming, writing their files).
type Denial struct {
	Read  []string
	Write []string
}

// Deny runs fn with the access in d refused by the kernel, with EACCES, as
// a permission problem shows itself — for root too, which file modes do
// not stop (CI runs as root). fn runs on its own goroutine, locked to a new
// OS thread that is restricted with Landlock and ends with fn; everything
// fn does on that goroutine is bound, goroutines it starts are not. fn
// must not call t.FailNow (require); return what to check instead.
//
// Without Landlock, a user other than root gets the same from file modes
// (chmod 0 on the files, 0o500 on the folders, restored afterwards); root
// without Landlock skips, or fails under ACPD_REQUIRE_SANDBOX=1.
func Deny(t testing.TB, d Denial, fn func()) {
	t.Helper()
	if !sandbox.Probe().Usable() && os.Geteuid() != 0 {
		denyByMode(t, d, fn)
		return
	}
	denyByKernel(t, d, fn)
}

// denyByMode is Deny for a user other than root on a kernel without
// Landlock: file modes do it.
func denyByMode(t testing.TB, d Denial, fn func()) {
	t.Helper()
	restore := map[string]os.FileMode{}
	set := func(p string, m os.FileMode) {
		fi, err := os.Stat(p)
		if err != nil {
			t.Fatalf("sandboxtest.Deny: %v", err)
		}
		restore[p] = fi.Mode().Perm()
		if err := os.Chmod(p, m); err != nil {
			t.Fatalf("sandboxtest.Deny: %v", err)
		}
	}
	for _, p := range d.Read {
		set(p, 0)
	}
	for _, p := range d.Write {
		set(p, 0o500)
	}
	defer func() {
		var errs []string
		for p, m := range restore {
			if err := os.Chmod(p, m); err != nil {
				errs = append(errs, err.Error())
			}
		}
		if len(errs) > 0 {
			t.Errorf("sandboxtest.Deny: restoring modes: %s", strings.Join(errs, "; "))
		}
	}()
	fn()
}
