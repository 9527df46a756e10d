//go:build linux

package sandboxtest

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"testing"

	"github.com/landlock-lsm/go-landlock/landlock"
	ll "github.com/landlock-lsm/go-landlock/landlock/syscall"
	"golang.org/x/sys/unix"
)

// denyByKernel is Deny with Landlock.
func denyByKernel(t testing.TB, d Denial, fn func()) {
	t.Helper()
	Require(t)
	var read, write landlock.AccessFSSet
	if len(d.Read) > 0 {
		read = landlock.AccessFSSet(ll.AccessFSReadFile)
	}
	if len(d.Write) > 0 {
		write = landlock.AccessFSSet(ll.AccessFSWriteFile | ll.AccessFSTruncate | ll.AccessFSRemoveDir | ll.AccessFSRemoveFile |
			ll.AccessFSMakeChar | ll.AccessFSMakeDir | ll.AccessFSMakeReg | ll.AccessFSMakeSock | ll.AccessFSMakeFifo |
			ll.AccessFSMakeBlock | ll.AccessFSMakeSym | ll.AccessFSRefer)
	}
	rules, err := grantAllBut(read|write, d)
	if err != nil {
		t.Fatalf("sandboxtest.Deny: %v", err)
	}
	cfg := landlock.Config{HandledAccessFS: read | write}
	fd, flags, err := cfg.NewRulesetFD(rules...)
	if err != nil || fd < 0 {
		t.Fatalf("sandboxtest.Deny: ruleset: %v", err)
	}
	defer unix.Close(fd)
	done := make(chan any, 1)
	go func() {
		// Never unlocked: the restricted thread ends with this goroutine
		// and is not reused for others.
		runtime.LockOSThread()
		defer func() { done <- recover() }()
		if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
			panic(fmt.Sprintf("sandboxtest.Deny: no_new_privs: %v", err))
		}
		if err := ll.LandlockRestrictSelf(fd, flags); err != nil {
			panic(fmt.Sprintf("sandboxtest.Deny: landlock_restrict_self: %v", err))
		}
		fn()
	}()
	if p := <-done; p != nil {
		panic(p)
	}
}

// fileRights are the rights Landlock accepts on a file that is not a
// folder.
const fileRights = landlock.AccessFSSet(ll.AccessFSExecute | ll.AccessFSWriteFile | ll.AccessFSReadFile | ll.AccessFSTruncate | ll.AccessFSIoctlDev)

// grantAllBut grants rights everywhere except on the targets of d: on
// every entry of every folder from / down to each target, but the targets
// and the folders that lead to them. A folder denied for writing keeps
// its files readable.
func grantAllBut(rights landlock.AccessFSSet, d Denial) ([]landlock.Rule, error) {
	var targets, ancestors []string
	for _, p := range slices.Concat(d.Read, d.Write) {
		real, err := filepath.EvalSymlinks(p)
		if err != nil {
			return nil, err
		}
		targets = append(targets, real)
		for a := filepath.Dir(real); ; a = filepath.Dir(a) {
			ancestors = append(ancestors, a)
			if a == "/" {
				break
			}
		}
	}
	var rules []landlock.Rule
	for _, a := range ancestors {
		ents, err := os.ReadDir(a)
		if err != nil {
			return nil, err
		}
		for _, e := range ents {
			p := filepath.Join(a, e.Name())
			if slices.Contains(targets, p) || slices.Contains(ancestors, p) {
				continue
			}
			r := rights
			if fi, err := os.Stat(p); err != nil {
				continue // a dangling link: nothing to grant
			} else if !fi.IsDir() {
				r &= fileRights
			}
			if r != 0 {
				// Another test's temp folder may be gone by the time the
				// ruleset is built: nothing to grant there either.
				rules = append(rules, landlock.PathAccess(r, p).IgnoreIfMissing())
			}
		}
	}
	if read := rights & landlock.AccessFSSet(ll.AccessFSReadFile); read != 0 {
		for _, w := range d.Write {
			rules = append(rules, landlock.PathAccess(read, w))
		}
	}
	return rules, nil
}
