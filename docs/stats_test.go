package docs

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/acpd/acpd/acp/acptest"
)

// TestStatsTables: every acpd stats table the pages show has the header
// the built acpd prints today, and every summary line of such a block
// starts as one of today's summary lines does. The tables are printed by a
// real run (a scripted turn in a fresh data folder), so a column or a
// summary line that changes makes the pages that show it fail here.
func TestStatsTables(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("runs the built acpd")
	}
	bin := acptest.Acpd(t)
	dir := t.TempDir()
	script := filepath.Join(dir, "s.jsonl")
	require.NoError(t, os.WriteFile(script, []byte(`{"toolCalls":[{"name":"glob","arguments":{"pattern":"*"}}]}`+"\n"+`{"text":"Done."}`+"\n"), 0o644))
	env := append(os.Environ(), "HOME="+dir, "XDG_CONFIG_HOME="+filepath.Join(dir, "config"))
	data := filepath.Join(dir, "data")
	run := exec.Command(bin, "run", "--data-dir", data, "--provider", "script", "--model-script", script, "--model", "demo", "--yolo", "hi")
	run.Env, run.Dir = env, dir
	out, err := run.CombinedOutput()
	require.NoError(t, err, "%s", out)
	stats := exec.Command(bin, "stats", "--data-dir", data)
	stats.Env = env
	out, err = stats.Output()
	require.NoError(t, err)
	lines := strings.Split(strings.TrimRight(string(out), "\n"), "\n")
	header := strings.TrimRight(lines[0], " ")
	require.True(t, strings.HasPrefix(header, "START (UTC)"), "%s", out)
	// Today's summary lines, by what they start with.
	var labels []string
	for _, l := range lines[1:] {
		if l == "" || strings.HasPrefix(l, "20") {
			continue // a row
		}
		if k, _, ok := strings.Cut(l, ":"); ok {
			labels = append(labels, k+":")
		} else {
			labels = append(labels, strings.Fields(l)[1]) // "N turns in M sessions"
		}
	}

	found := 0
	for _, p := range pages(t) {
		for _, b := range p.blocks {
			at := -1
			for i, l := range b.body {
				if strings.HasPrefix(l, "START (UTC)") {
					at = i
				}
			}
			if at < 0 {
				continue
			}
			found++
			assert.Equal(t, header, strings.TrimRight(b.body[at], " "), "%s:%d: the acpd stats header is not today's; regenerate the block from a real run", p.path, b.line)
			for _, l := range b.body[at+1:] {
				if l == "" || strings.HasPrefix(l, "20") || strings.HasPrefix(l, "$ ") || strings.HasPrefix(l, "…") || strings.HasPrefix(l, "  ") {
					continue
				}
				if strings.HasPrefix(l, "what-if:") || strings.HasPrefix(l, "replayed:") || strings.HasPrefix(l, "decided calls") || strings.HasPrefix(l, "cost:") {
					continue // printed only with a replay, decisions or prices
				}
				ok := false
				for _, lab := range labels {
					ok = ok || strings.HasPrefix(l, lab) || strings.Contains(l, " "+lab+" ")
				}
				assert.True(t, ok, "%s:%d: %q is not a line acpd stats prints today (it prints %q)", p.path, b.line, l, labels)
			}
		}
	}
	assert.GreaterOrEqual(t, found, 3, "the stats tables of telemetry.md, guard.md and cost.md")
}
