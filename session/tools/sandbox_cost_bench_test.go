package tools

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/acpd/acpd/acp/acptest"
	"github.com/acpd/acpd/session/tools/sandbox/sandboxtest"
)

// session30 are thirty ordinary local development commands (reading,
// searching, counting, editing, moving files, a failing test): what a
// session's commands mostly are. None reaches the network, so what is
// measured is the sandbox's cost per command, not a host's.
var session30 = []string{
	"ls -la", "cat README.md", "head -n 5 main.go", "wc -l main.go", "grep -rn func .",
	"find . -name '*.go'", "sed -n 2,4p main.go", "echo note >> notes.txt", "sort notes.txt", "uniq -c notes.txt",
	"cp main.go main_copy.go", "diff main.go main_copy.go", "mv main_copy.go old.go", "rm -f old.go", "mkdir -p build/out",
	"touch build/out/a.o", "ls build/out", "rm -rf build", "test -f main.go && echo yes", "printf '%s\\n' a b c | tr a-z A-Z",
	"awk '{print $1}' README.md", "cut -c1-10 README.md", "stat -c %s main.go", "basename $PWD", "pwd",
	"env | wc -l", "date +%s", "true", "sh -c 'exit 3' || echo failed", "cat notes.txt | tail -n 1",
}

// BenchmarkSandboxCost is what the sandbox costs a command: `true` and the
// thirty commands of session30 (one op runs all thirty), unconfined and
// sandboxed as costSandbox configures it — in this tree with the deny list
// of a default configuration and the network through acpd's proxy. Built
// as one file with the policy apart (sandbox_cost_policy_test.go), so the
// same loop runs in an older tree with that tree's sandbox. Target: within
// 2 ms a command of the sandbox before the deny list and the proxy.
//
//	go test ./session/tools -run '^$' -bench SandboxCost -count 6
func BenchmarkSandboxCost(b *testing.B) {
	for _, confined := range []bool{false, true} {
		name := "unconfined"
		if confined {
			name = "sandboxed"
		}
		b.Run(name+"/true", func(b *testing.B) {
			w := costWorkspace(b, confined)
			benchCommands(b, w, []string{"true"})
		})
		b.Run(name+"/session30", func(b *testing.B) {
			w := costWorkspace(b, confined)
			benchCommands(b, w, session30)
		})
	}
}

func costWorkspace(b *testing.B, confined bool) *workspace {
	w := newWorkspace(b)
	require.NoError(b, os.WriteFile(w.path("README.md"), []byte(strings.Repeat("acpd is an ACP agent daemon\n", 20)), 0o644))
	require.NoError(b, os.WriteFile(w.path("main.go"), []byte("package main\n\nfunc main() {\n\tprintln(1)\n}\n\nfunc other() {}\n"), 0o644))
	if confined {
		sandboxtest.Require(b)
		costSandbox(b, w, acptest.Acpd(b))
	}
	return w
}

// benchCommands runs cmds through run_shell_command once to warm up (the
// spawn server starts), then once per op.
func benchCommands(b *testing.B, w *workspace, cmds []string) {
	run := func() {
		for _, cmd := range cmds {
			c, err := tool(b, NameRunShellCommand).Build(w.env, args(b, map[string]any{"command": cmd}))
			require.NoError(b, err)
			if res := c.Execute(b.Context(), w.env); res.Err != nil {
				b.Fatal(res.LLMContent)
			}
		}
	}
	run()
	_ = os.Remove(filepath.Join(w.root, "notes.txt"))
	server := 0
	if w.env.Sandbox != nil {
		server = w.env.Sandbox.ServerPid()
	}
	before := childCPU(b) + serverCPU(b, server)
	for b.Loop() {
		run()
	}
	// The commands' CPU time (shells, helper or spawn server), which a
	// busy machine inflates much less than the wall time.
	used := childCPU(b) + serverCPU(b, server) - before
	b.ReportMetric(float64(used.Microseconds())/1000/float64(b.N), "child-cpu-ms/op")
}
