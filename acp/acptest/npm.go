package acptest

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// RequireInteropEnv is the variable CI sets so that a test needing node and
// npm fails where it would otherwise skip.
const RequireInteropEnv = "ACPD_REQUIRE_INTEROP"

// NodeAndNPM returns the paths of node and npm. Without them the test is
// skipped, or fails when RequireInteropEnv is set (CI has both).
func NodeAndNPM(t testing.TB, what string) (node, npm string) {
	t.Helper()
	missing := t.Skipf
	if os.Getenv(RequireInteropEnv) != "" {
		missing = t.Fatalf
	}
	node, err := exec.LookPath("node")
	if err != nil {
		missing("%s needs node on PATH (CI has it)", what)
	}
	npm, err = exec.LookPath("npm")
	if err != nil {
		missing("%s needs npm on PATH (CI has it)", what)
	}
	return node, npm
}

// npmInstalls holds a mutex per install folder.
var npmInstalls sync.Map

// NPMInstall installs the packages of the package.json and package-lock.json
// in dir, exactly as locked, and returns the node_modules folder. Installs
// are cached under the user's cache folder by the hash of the two files,
// so a machine downloads each set once; a concurrent or interrupted run
// never sees a half-written install. check is a file under node_modules
// that a complete install has. installArgs follow `npm` (e.g. "ci").
func NPMInstall(t testing.TB, npm, dir, check string, installArgs ...string) string {
	t.Helper()
	manifest, err := os.ReadFile(filepath.Join(dir, "package.json"))
	require.NoError(t, err)
	lock, err := os.ReadFile(filepath.Join(dir, "package-lock.json"))
	require.NoError(t, err)
	sum := sha256.Sum256(append(append([]byte{}, manifest...), lock...))
	key := filepath.Base(dir) + "-" + hex.EncodeToString(sum[:8])
	root := t.TempDir()
	if cache, err := os.UserCacheDir(); err == nil {
		root = filepath.Join(cache, "acpd-test")
	}
	modules := filepath.Join(root, key, "node_modules")
	// Parallel tests of one process wait for one install rather than each
	// downloading the same packages; separate processes still race safely
	// through the rename below.
	mu, _ := npmInstalls.LoadOrStore(filepath.Join(root, key), new(sync.Mutex))
	mu.(*sync.Mutex).Lock()
	defer mu.(*sync.Mutex).Unlock()
	if _, err := os.Stat(filepath.Join(modules, check)); err == nil {
		return modules
	} else if !errors.Is(err, fs.ErrNotExist) {
		require.NoError(t, err)
	}

	require.NoError(t, os.MkdirAll(root, 0o755))
	tmp, err := os.MkdirTemp(root, key+".tmp-")
	require.NoError(t, err)
	defer os.RemoveAll(tmp)
	require.NoError(t, os.WriteFile(filepath.Join(tmp, "package.json"), manifest, 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(tmp, "package-lock.json"), lock, 0o644))

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, npm, installArgs...)
	cmd.Dir = tmp
	start := time.Now()
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "npm %v in %s (needs the npm registry once):\n%s", installArgs, tmp, out)
	t.Logf("installed %s in %v", filepath.Base(dir), time.Since(start).Round(time.Millisecond))
	_, err = os.Stat(filepath.Join(tmp, "node_modules", check))
	require.NoError(t, err, "npm %v did not install %s", installArgs, check)

	dst := filepath.Join(root, key)
	err = os.Rename(tmp, dst)
	if errors.Is(err, fs.ErrExist) || errors.Is(err, syscall.ENOTEMPTY) {
		if _, serr := os.Stat(filepath.Join(modules, check)); serr == nil {
			return modules // another run installed it first
		}
		// A leftover without the package: replace it.
		require.NoError(t, os.RemoveAll(dst))
		err = os.Rename(tmp, dst)
	}
	require.NoError(t, err)
	return modules
}
