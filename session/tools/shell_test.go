package tools

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/acpd/acpd/acp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestRunShellCommand_Local(t *testing.T) {
	w := newWorkspace(t)
	require.NoError(t, os.Mkdir(w.path("sub"), 0o755))
	tests := []struct {
		name      string
		args      map[string]any
		max       int
		title     string
		wantLLM   []string
		wantShown string
	}{
		{name: "stdout", args: map[string]any{"command": "echo hello"}, title: "echo hello",
			wantLLM: []string{"Command: echo hello", "Output: hello", "Exit Code: 0"}, wantShown: "hello\n"},
		{name: "stderr interleaved and exit code", args: map[string]any{"command": "echo out; echo err >&2; exit 3"}, title: "echo out; echo err >&2; exit 3",
			wantLLM: []string{"out\nerr", "Exit Code: 3"}, wantShown: "out\nerr\n\n[exit code 3]"},
		{name: "directory", args: map[string]any{"command": "pwd", "directory": w.path("sub")}, title: "pwd [in " + w.path("sub") + "]",
			wantLLM: []string{"Output: " + w.path("sub"), "Directory: " + w.path("sub")}},
		{name: "signal", args: map[string]any{"command": "kill -TERM $$"}, title: "kill -TERM $$",
			wantLLM: []string{"Signal: terminated"}},
		{name: "output truncated keeping the end", args: map[string]any{"command": "seq 1 20000"}, max: 64, title: "seq 1 20000",
			wantLLM: []string{"[output truncated: first", "20000"}},
		{name: "empty output", args: map[string]any{"command": "true"}, title: "true", wantLLM: []string{"Output: (empty)"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			env := *w.env
			env.MaxOutputBytes = tt.max
			c, res := run(t, t.Context(), &env, NameRunShellCommand, tt.args)
			require.NoError(t, res.Err)
			assert.Equal(t, tt.title, c.Title())
			for _, s := range tt.wantLLM {
				assert.Contains(t, res.LLMContent, s)
			}
			require.Len(t, res.Content, 1)
			if tt.wantShown != "" {
				assert.Equal(t, tt.wantShown, text(res.Content[0]))
			}
		})
	}
}

func TestRunShellCommand_Confirmation(t *testing.T) {
	w := newWorkspace(t)
	c, err := tool(t, NameRunShellCommand).Build(w.env, args(t, map[string]any{"command": "npm test && git push", "description": "test and push"}))
	require.NoError(t, err)
	conf := c.Confirmation()
	assert.Equal(t, ConfirmExec, conf.Kind)
	assert.Equal(t, "npm test, git push", conf.Label)
	assert.False(t, conf.NoAlways)
	assert.Equal(t, ShellWrite, conf.Shell)
	require.Len(t, conf.Content, 1)
	assert.Equal(t, "npm test && git push\n\ntest and push", text(conf.Content[0]))
	assert.Nil(t, c.Locations())
}

func TestRunShellCommand_Timeout(t *testing.T) {
	w := newWorkspace(t)
	start := time.Now()
	_, res := run(t, t.Context(), w.env, NameRunShellCommand, map[string]any{"command": "echo started; sleep 30", "timeout": 100})
	require.Error(t, res.Err)
	assert.Equal(t, ErrTypeTimeout, res.ErrType)
	assert.Contains(t, res.LLMContent, "timed out after 100ms")
	assert.Contains(t, res.LLMContent, "started")
	assert.Less(t, time.Since(start), 5*time.Second)

	env := *w.env
	env.ShellTimeout = 100 * time.Millisecond
	_, res = run(t, t.Context(), &env, NameRunShellCommand, map[string]any{"command": "sleep 30"})
	assert.Equal(t, ErrTypeTimeout, res.ErrType)
}

// groupMembers lists live (non-zombie) processes in process group pgid.
func groupMembers(t *testing.T, pgid int) []int {
	t.Helper()
	ents, err := os.ReadDir("/proc")
	require.NoError(t, err)
	var pids []int
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		// pid (comm) state ppid pgrp ...; comm may contain spaces.
		rest := b[bytes.LastIndexByte(b, ')')+2:]
		f := strings.Fields(string(rest))
		if len(f) < 3 || f[0] == "Z" || f[0] == "X" {
			continue
		}
		if g, _ := strconv.Atoi(f[2]); g == pgid {
			pids = append(pids, pid)
		}
	}
	return pids
}

func TestRunShellCommand_CancelKillsProcessGroup(t *testing.T) {
	if _, err := os.Stat("/proc/self/stat"); err != nil {
		t.Skip("needs /proc")
	}
	tests := []struct{ name, command string }{
		{"sleep", "echo $$ > pid; sleep 30"},
		{"background child", "echo $$ > pid; sleep 30 & sleep 30; wait"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := newWorkspace(t)
			c, err := tool(t, NameRunShellCommand).Build(w.env, args(t, map[string]any{"command": tt.command}))
			require.NoError(t, err)
			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			done := make(chan Result, 1)
			go func() { done <- c.Execute(ctx, w.env) }()

			var pgid int
			require.Eventually(t, func() bool {
				b, err := os.ReadFile(w.path("pid"))
				if err != nil || !bytes.HasSuffix(b, []byte("\n")) {
					return false
				}
				pgid, err = strconv.Atoi(strings.TrimSpace(string(b)))
				return err == nil
			}, 10*time.Second, 5*time.Millisecond)
			wantMembers := strings.Count(tt.command, "sleep 30") + 1
			require.Eventually(t, func() bool { return len(groupMembers(t, pgid)) >= wantMembers }, 10*time.Second, 5*time.Millisecond)

			cancelled := time.Now()
			cancel()
			select {
			case res := <-done:
				assert.Equal(t, ErrTypeCancelled, res.ErrType)
				assert.ErrorIs(t, res.Err, context.Canceled)
			case <-time.After(time.Second):
				t.Fatal("Execute did not return within 1s of cancel")
			}
			require.Eventually(t, func() bool { return len(groupMembers(t, pgid)) == 0 },
				time.Second-time.Since(cancelled), 5*time.Millisecond, "process group still alive")
		})
	}
}

func TestRunShellCommand_BackgroundLeftoversKilled(t *testing.T) {
	w := newWorkspace(t)
	done := make(chan Result, 1)
	go func() {
		_, res := run(t, t.Context(), w.env, NameRunShellCommand, map[string]any{"command": "echo $$ > pid; sleep 30 & echo started"})
		done <- res
	}()
	select {
	case res := <-done:
		require.NoError(t, res.Err)
		assert.Contains(t, res.LLMContent, "started")
	case <-time.After(5 * time.Second):
		t.Fatal("a background child kept the command running")
	}
	b, err := os.ReadFile(w.path("pid"))
	require.NoError(t, err)
	pgid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	require.NoError(t, err)
	require.Eventually(t, func() bool { return len(groupMembers(t, pgid)) == 0 }, time.Second, 5*time.Millisecond)
}

func TestClassifyShell(t *testing.T) {
	tests := []struct {
		cmd  string
		want ShellClass
	}{
		{"ls -la", ShellReadOnly},
		{"cat a.txt | grep foo | wc -l", ShellReadOnly},
		{"git status && git diff HEAD~1", ShellReadOnly},
		{"git log --oneline -5", ShellReadOnly},
		{"git -C sub status", ShellReadOnly},
		{"git branch", ShellReadOnly},
		{"find . -name '*.go'", ShellReadOnly},
		{"grep -rn 'x > y' src", ShellReadOnly},
		{"echo hi 2>&1", ShellReadOnly},
		{"ls > /dev/null 2>&1", ShellReadOnly},
		{"LC_ALL=C head -n 5 file", ShellReadOnly},
		{"FOO=1 head -n 5 file", ShellUnknown},
		{"PATH=.:$PATH ls", ShellUnknown},
		{"LD_PRELOAD=./x.so cat f", ShellUnknown},
		{"env LD_PRELOAD=./x.so cat f", ShellUnknown},
		{"env LC_ALL=C cat f", ShellReadOnly},
		{"env", ShellReadOnly},
		{"env -u HOME ls", ShellReadOnly},
		{"env -u ls rm -rf x", ShellWrite},
		{"nice -n 5 cat f", ShellReadOnly},
		{"timeout 5 cat f", ShellReadOnly},
		{"timeout -s KILL 5 rm x", ShellWrite},
		{"xargs -I {} cat {}", ShellReadOnly},
		{"xargs -0 rm", ShellWrite},
		{"command -v ls", ShellReadOnly},
		{"./ls", ShellUnknown},
		{"/usr/bin/ls -la", ShellReadOnly},
		{"/tmp/ls", ShellUnknown},
		// Plan mode's attacks: each writes or runs a program.
		{"sed -n '1e touch x' f", ShellUnknown},
		{"sed -n '1,5p' f", ShellReadOnly},
		{"sed -n -e '/a/p' -e 's/x/y/gp' f", ShellReadOnly},
		{"sed -ne '3p' f", ShellReadOnly},
		{"sed 's/a/b/w out' f", ShellWrite},
		{"sed 's/a/b/e' f", ShellUnknown},
		{"sed '1w out' f", ShellWrite},
		{"sed 'r /etc/passwd' f", ShellUnknown},
		{"sed -f script.sed f", ShellUnknown},
		{"sed 's|a/b|c|g' f", ShellReadOnly},
		{"sed '/x/!d;$q' f", ShellReadOnly},
		{"sed --in-place 's/a/b/' f", ShellWrite},
		{"git -c core.fsmonitor='touch x' status", ShellUnknown},
		{"git --exec-path=. status", ShellUnknown},
		{"git --git-dir=/other/.git log", ShellUnknown},
		{"git -p log", ShellUnknown},
		{"git --no-pager log -1", ShellReadOnly},
		{"git ls-remote --upload-pack='touch x' .", ShellUnknown},
		{"git ls-remote origin", ShellUnknown},
		{"git log --output=x -1", ShellWrite},
		{"git log --ext-diff -p", ShellUnknown},
		{"git diff --textconv", ShellUnknown},
		{"git grep -O foo", ShellUnknown},
		{"git grep --open-files-in-pager=vim foo", ShellUnknown},
		{"git cat-file --filters HEAD:a", ShellUnknown},
		{"git help log", ShellUnknown},
		{"git remote show origin", ShellUnknown},
		{"git remote -v", ShellReadOnly},
		{"git tag -v v1", ShellUnknown},
		{"git config --get user.name", ShellReadOnly},
		{"uniq a x", ShellUnknown},
		{"uniq -c a", ShellReadOnly},
		{"uniq -f 2 a", ShellReadOnly},
		{"xxd -r -p a.hex x", ShellUnknown},
		{"xxd a.bin", ShellReadOnly},
		{"sort -o x a", ShellUnknown},
		{"sort --output=x a", ShellUnknown},
		{"sort --compress-program=sh a", ShellUnknown},
		{"sort -k 2 -t , -n a", ShellReadOnly},
		{"find . -fprint x", ShellWrite},
		{"find . -newermt 2020-01-01 -mtime -5 -print", ShellReadOnly},
		{"find . -name x -execdir rm {} +", ShellUnknown},
		{"find . -okdir cat {} ;", ShellUnknown},
		{"rg --pre ./evil foo", ShellUnknown},
		{"rg -n --glob '*.go' foo", ShellReadOnly},
		{"less -o log f", ShellUnknown},
		{"tree -o out", ShellUnknown},
		{"tree -L 2", ShellReadOnly},
		{"file -C -m x", ShellUnknown},
		{"date -s 2020-01-01", ShellUnknown},
		{"date 0101000020", ShellWrite},
		{"date +%s", ShellReadOnly},
		{"hostname evil", ShellUnknown},
		{"hostname -f", ShellReadOnly},
		{"stty raw", ShellUnknown},
		{"stty -a", ShellReadOnly},
		{"yarn --version", ShellUnknown},
		{"go list -json ./...", ShellReadOnly},
		{"go list -toolexec ./x ./...", ShellUnknown},
		{"go list -export ./...", ShellUnknown},
		{"sed -n '1,5p' f", ShellReadOnly},
		{"cat <<EOF\nhi\nEOF", ShellReadOnly},
		{"echo hi > out.txt", ShellWrite},
		{"echo hi >> out.txt", ShellWrite},
		{"ls&>out", ShellWrite},
		{"rm -rf build", ShellWrite},
		{"mv a b", ShellWrite},
		{"git commit -m 'x'", ShellWrite},
		{"git push origin main", ShellWrite},
		{"git branch -D old", ShellWrite},
		{"git branch feature", ShellWrite},
		{"find . -name '*.tmp' -delete", ShellWrite},
		{"sed -i 's/a/b/' f", ShellWrite},
		{"ls; rm x", ShellWrite},
		{"cat a | tee b", ShellWrite},
		{"npm install", ShellWrite},
		{"sudo ls", ShellWrite},
		{"xargs rm < list", ShellWrite},
		{"find . -exec cat {} \\;", ShellUnknown},
		{"npm test", ShellUnknown},
		{"make", ShellUnknown},
		{"python script.py", ShellUnknown},
		{"echo $(rm -rf /)", ShellWrite},
		{"echo $(date)", ShellUnknown},
		{"cat <<'EOF' | grep x\nrm -rf /\nEOF\nls", ShellReadOnly},
		{"cat <<EOF\nhi\nEOF\nrm x", ShellWrite},
		{"cat `ls`", ShellUnknown},
		{"ls 'unterminated", ShellUnknown},
		{"awk '{print}' f", ShellUnknown},
		{"", ShellUnknown},
	}
	for _, tt := range tests {
		t.Run(tt.cmd, func(t *testing.T) {
			assert.Equal(t, tt.want, classifyShell(tt.cmd))
		})
	}
}

func TestAlwaysLabel(t *testing.T) {
	tests := []struct {
		cmd  string
		want string // "" when no "always" may cover the line
	}{
		{"npm test", "npm test"},
		{"npm --version", "npm"},
		{"/usr/bin/git status -s", "/usr/bin/git status"},
		{"./ls -la", "./ls"},
		{"FOO=1 go test ./...", "FOO=1 go test"},
		{"LD_PRELOAD=/tmp/x.so ls", "LD_PRELOAD=/tmp/x.so ls"},
		{"ls -la | grep x && ls", "ls, grep"},
		{"echo 'a; rm b'", "echo"},
		{"cd sub && make build", "cd, make build"},
		{"ls 2>&1 >/dev/null", "ls"},
		{"cat < in.txt", "cat"},
		{"grep x <<< 'a b'", "grep"},
		{"if test -f x; then cat x; fi", "test, cat"},
		{"for f in a b; do wc -l $f; done", "wc"},
		{"{ ls; }", "ls"},
		{"find . | xargs rm", "find, xargs rm"},
		{"env A=1 ls", "env A=1 ls"},
		{"timeout 5 ls", "timeout 5 ls"},
		{"cat <<EOF\nplain\nEOF\n", "cat"},
		{"cat <<'EOF'\n$(data) `too`\nEOF\n", "cat"},
		{"cat <<E\"O\"F\nbody\nEOF\n", "cat"},
		{"cat <<-EOF\n\tbody\n\tEOF\nls", "cat, ls"},
		// Never covered: each hides something its roots do not show.
		{"ls `touch a`", ""},
		{"ls $(touch b)", ""},
		{"ls \"$(touch b)\"", ""},
		{"ls \"`touch b`\"", ""},
		{"diff <(ls a) <(ls b)", ""},
		{"ls >(cat)", ""},
		{"ls <<E\"O\"F\ntouch c", ""},
		{"ls <<EOF\ntouch c", ""},
		{"ls <<EOF", ""},
		{"ls <<EOF\n$(touch d)\nEOF", ""},
		{"ls <<EOF\n`touch d`\nEOF", ""},
		{"cat <<EOF\n\tEOF\ntouch e", ""},
		{"ls <<$X\n$X\n", ""},
		{"ls $'\\x27'", ""},
		{"ls 'unterminated", ""},
		{"ls > out.txt", ""},
		{"ls >&out.txt", ""},
		{"ls &> out.txt", ""},
		{"ls <> f", ""},
		{"$CMD -la", ""},
		{"/bin/l? -la", ""},
		{"nice -n 5 rm -rf x", ""},
		{"x=$(rm -rf ~)", ""},
		{"", ""},
	}
	for _, tt := range tests {
		t.Run(tt.cmd, func(t *testing.T) {
			got, ok := alwaysLabel(tt.cmd)
			assert.Equal(t, tt.want, got)
			assert.Equal(t, tt.want != "", ok)
		})
	}
}

func TestRunShellCommand_ContentIsText(t *testing.T) {
	w := newWorkspace(t)
	_, res := run(t, t.Context(), w.env, NameRunShellCommand, map[string]any{"command": "printf 'a\\nb'"})
	require.NoError(t, res.Err)
	require.Len(t, res.Content, 1)
	assert.Equal(t, "content", res.Content[0].Type)
	assert.Equal(t, acp.TextContent("a\nb"), res.Content[0])
}
