package store

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/acpd/acpd/acp"
)

const crashEnv = "ACPD_STORE_CRASH_DIR"

// TestCrashHelper is the child of TestWriter_SurvivesSIGKILL: it appends
// records forever, printing the number of each record Append returned for.
func TestCrashHelper(t *testing.T) {
	dir := os.Getenv(crashEnv)
	if dir == "" {
		t.Skip("helper process for TestWriter_SurvivesSIGKILL")
	}
	s, err := Open(dir, Options{})
	if err != nil {
		fmt.Println("error", err)
		os.Exit(2)
	}
	w, err := s.Create(SessionMeta{ID: "crash", Cwd: "/w"})
	if err != nil {
		fmt.Println("error", err)
		os.Exit(2)
	}
	for i := 0; ; i++ {
		// Vary the size up to 256 KiB so that some writes are large
		// enough to be cut by the kill.
		pad := strings.Repeat("x", (i*7919)%(256<<10))
		var rec Record
		switch i % 3 {
		case 0:
			rec = Record{Kind: KindText, Text: fmt.Sprintf("rec %d %s", i, pad)}
		case 1:
			rec = Record{Kind: KindToolResult, Tool: &ToolCallRecord{ToolCallID: fmt.Sprintf("rec %d", i), ModelText: pad}}
		default:
			rec = Record{Kind: KindUser, Prompt: []acp.ContentBlock{acp.TextBlock(fmt.Sprintf("rec %d %s", i, pad))}}
		}
		if err := w.Append(rec); err != nil {
			fmt.Println("error", err)
			os.Exit(2)
		}
		fmt.Println(i)
	}
}

func recordSeq(t *testing.T, r Record) int {
	t.Helper()
	var s string
	switch r.Kind {
	case KindText:
		s = r.Text
	case KindToolResult:
		s = r.Tool.ToolCallID
	case KindUser:
		s = r.Prompt[0].Text
	default:
		t.Fatalf("unexpected record kind %s", r.Kind)
	}
	f := strings.Fields(s)
	require.GreaterOrEqual(t, len(f), 2, "record text %.40q", s)
	n, err := strconv.Atoi(f[1])
	require.NoError(t, err)
	return n
}

func TestWriter_SurvivesSIGKILL(t *testing.T) {
	if testing.Short() {
		t.Skip("spawns a child process")
	}
	for round := range 3 {
		t.Run(fmt.Sprintf("round%d", round), func(t *testing.T) {
			dir := t.TempDir()
			cmd := exec.CommandContext(t.Context(), os.Args[0], "-test.run=^TestCrashHelper$", "-test.count=1")
			cmd.Env = append(os.Environ(), crashEnv+"="+dir)
			out, err := cmd.StdoutPipe()
			require.NoError(t, err)
			require.NoError(t, cmd.Start())

			// Kill at a different depth each round.
			killAfter := 50 + round*150
			acked := make(chan int, 1)
			go func() {
				sc := bufio.NewScanner(out)
				last := -1
				for sc.Scan() {
					n, err := strconv.Atoi(sc.Text())
					if err != nil {
						continue // test framework chatter or an error line
					}
					last = n
					if n == killAfter {
						_ = cmd.Process.Signal(syscall.SIGKILL)
					}
				}
				acked <- last
			}()
			var last int
			select {
			case last = <-acked:
			case <-time.After(60 * time.Second):
				_ = cmd.Process.Kill()
				t.Fatal("helper did not reach the kill point")
			}
			_ = cmd.Wait()
			require.GreaterOrEqual(t, last, killAfter, "the helper stopped before the kill point")

			s := openStore(t, dir)
			tr, err := s.Load("crash")
			require.NoError(t, err)
			assert.Zero(t, tr.CorruptLine)
			for _, w := range tr.Warnings {
				assert.Contains(t, w.Msg, "torn or corrupt last record", "only the last line may be torn")
			}
			recs := tr.Records[1:]
			// Every record whose Append returned is there, in order,
			// whole; at most the one in flight at the kill follows.
			require.GreaterOrEqual(t, len(recs), last+1)
			require.LessOrEqual(t, len(recs), last+2)
			for i, r := range recs {
				require.Equal(t, i, recordSeq(t, r))
			}

			// The session continues after the crash.
			w, _, err := s.Resume("crash")
			require.NoError(t, err)
			require.NoError(t, w.Append(Record{Kind: KindText, Text: fmt.Sprintf("rec %d after", len(recs))}))
			require.NoError(t, w.Close())
			tr, err = s.Load("crash")
			require.NoError(t, err)
			assert.Empty(t, tr.Warnings)
			assert.Len(t, tr.Records, len(recs)+2)
			page, _, err := s.List(ListOptions{})
			require.NoError(t, err)
			assert.Equal(t, []string{"crash"}, ids(page))
		})
	}
}
