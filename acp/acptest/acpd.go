package acptest

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"
)

// built is the acpd binary of this test process: one `go build` however
// many tests and packages' helpers ask for it.
var built struct {
	once      sync.Once
	dir, path string
	err       error
}

// BuildAcpd builds acpd (github.com/acpd/acpd/cmd/acpd) the first time it
// is called in a test process and returns the binary's path; later calls
// return the same binary, or the same build error.
func BuildAcpd() (string, error) {
	built.once.Do(func() {
		built.dir, built.err = os.MkdirTemp("", "acpd-test-")
		if built.err != nil {
			return
		}
		bin := filepath.Join(built.dir, "acpd")
		if out, err := exec.Command("go", "build", "-o", bin, "github.com/acpd/acpd/cmd/acpd").CombinedOutput(); err != nil {
			built.err = fmt.Errorf("go build acpd: %v\n%s", err, out)
			return
		}
		built.path = bin
	})
	return built.path, built.err
}

// Acpd is BuildAcpd for one test: a failed build fails t.
func Acpd(t testing.TB) string {
	t.Helper()
	bin, err := BuildAcpd()
	if err != nil {
		t.Fatal(err)
	}
	return bin
}

// RemoveAcpd deletes the binary BuildAcpd built, if it did; a TestMain
// calls it once the tests have run.
func RemoveAcpd() {
	if built.dir != "" {
		_ = os.RemoveAll(built.dir)
	}
}

// WaitExit waits for cmd, an acpd over stdio whose stdin the caller has just
// closed, to exit 0 within the given time, as acpd does when its editor goes
// away. Past it the process is killed and reaped and t fails, so no test
// leaves a daemon behind.
func WaitExit(t testing.TB, cmd *exec.Cmd, within time.Duration) {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("acpd exits 0 when its stdin closes: %v", err)
		}
	case <-time.After(within):
		_ = cmd.Process.Kill()
		<-done
		t.Errorf("acpd did not exit within %s of its stdin closing", within)
	}
}
