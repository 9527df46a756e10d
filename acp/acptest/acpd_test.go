package acptest

import (
	"fmt"
	"os/exec"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// errorsOf records what a helper reports instead of failing the test.
type errorsOf struct {
	testing.TB
	got []string
}

func (e *errorsOf) Errorf(format string, args ...any) {
	e.got = append(e.got, fmt.Sprintf(format, args...))
}

func TestWaitExit(t *testing.T) {
	ok := exec.Command("true")
	require.NoError(t, ok.Start())
	rec := &errorsOf{TB: t}
	WaitExit(rec, ok, 5*time.Second)
	require.Empty(t, rec.got)

	failed := exec.Command("false")
	require.NoError(t, failed.Start())
	rec = &errorsOf{TB: t}
	WaitExit(rec, failed, 5*time.Second)
	require.Len(t, rec.got, 1)
	require.Contains(t, rec.got[0], "exits 0")

	stuck := exec.Command("sleep", "30")
	require.NoError(t, stuck.Start())
	rec = &errorsOf{TB: t}
	WaitExit(rec, stuck, 100*time.Millisecond)
	require.Equal(t, []string{"acpd did not exit within 100ms of its stdin closing"}, rec.got)
	require.NotNil(t, stuck.ProcessState, "the stuck process was killed and reaped")
}
