package main

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/acpd/acpd/acp"
	"github.com/acpd/acpd/session/model/modeltest"
)

// BenchmarkGuard_Turn1000 measures what `acpd guard` costs in CPU: one
// session with one 1,000-call turn (100 model responses of 10 distinct
// read_file calls, so no limit fires), run by the agent alone and by the
// same agent behind the guard, alternately. The CPU of the guarded run is
// the guard's process with the agent it waited for (wait4 counts a
// process's waited-for children); the editor and the model server are this
// benchmark's process and are in neither. Reported: each run's CPU and
// their ratio, the target being at most 1.5.
//
//	go test -run '^$' -bench Guard_Turn1000 -benchtime 5x ./cmd/acpd
//
// The qwen-code sub-benchmark needs node and npm, as its tests do.
func BenchmarkGuard_Turn1000(b *testing.B) {
	for _, agent := range []struct {
		name string
		mk   func(testing.TB, *modeltest.Server) guardAgent
	}{{"agent=acpd", innerAcpd}, {"agent=qwen-code", qwenAgent}} {
		b.Run(agent.name, func(b *testing.B) {
			srv := modeltest.NewServer(b)
			a := agent.mk(b, srv)
			scenario{calls: 1000, batch: 10, args: distinctArgs}.install(srv, a.ws)
			data := b.TempDir()
			var alone, guarded time.Duration
			for b.Loop() {
				alone += turnCPU(b, a, startEditor(b, a, a.cmd))
				guarded += turnCPU(b, a, startGuard(b, a, data))
			}
			n := float64(b.N)
			b.ReportMetric(float64(alone.Milliseconds())/n, "alone-cpu-ms/op")
			b.ReportMetric(float64(guarded.Milliseconds())/n, "guarded-cpu-ms/op")
			b.ReportMetric(float64(guarded)/float64(alone), "cpu-ratio")
		})
	}
}

// turnCPU runs one session with one prompt through g, closes it and
// returns the process's CPU time (its waited-for children included).
func turnCPU(b *testing.B, a guardAgent, g *guarded) time.Duration {
	b.Helper()
	sid := g.newSession(a.ws)
	stop, e := g.prompt(sid, "read the lines")
	require.Nil(b, e, "stderr:\n%s", g.stderr.String())
	require.Equal(b, acp.StopEndTurn, stop)
	require.NoError(b, g.stdin.Close())
	<-g.done
	ps := g.cmd.ProcessState
	return ps.UserTime() + ps.SystemTime()
}
