package workspace

import (
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/acpd/acpd/session/agents"
	"github.com/acpd/acpd/session/commands"
	"github.com/acpd/acpd/session/instructions"
)

func names(set *commands.Set) []string {
	var out []string
	for _, c := range set.Commands() {
		out = append(out, c.Name)
	}
	return out
}

// TestHub_CommandsShared: the sessions of one workspace share one command
// set; a file added while they are idle is loaded once and each is told.
func TestHub_CommandsShared(t *testing.T) {
	ws := t.TempDir()
	mkfile(t, filepath.Join(ws, ".acpd", "commands", "review.md"), "Review it.")
	h := NewHub(nil, commands.Builtins)
	dirs := commands.Dirs([]string{ws}, "")
	var ca, cb calls
	a := h.Commands(dirs, ca.fn)
	b := h.Commands(commands.Dirs([]string{ws}, ""), cb.fn)
	first := a.Check()
	assert.Same(t, first, b.Check(), "one set for the workspace")
	assert.Contains(t, names(first), "review")
	assert.Contains(t, names(first), "compress")

	mkfile(t, filepath.Join(ws, ".qwen", "commands", "ship.toml"), "prompt = \"Ship it.\"\n")
	waitCalls(t, &ca, 1)
	waitCalls(t, &cb, 1)
	second := a.Check()
	assert.NotSame(t, first, second)
	assert.Same(t, second, b.Check())
	assert.Contains(t, names(second), "ship")

	// Check sees a change at once, before the watcher's debounce.
	mkfile(t, filepath.Join(ws, ".acpd", "commands", "late.md"), "Late.")
	assert.Contains(t, names(b.Check()), "late")
	waitCalls(t, &ca, 2)
	quiet(t, &ca)
	assert.Equal(t, int32(2), ca.n.Load(), "the watcher's reload found nothing new to tell")

	a.Close()
	b.Close()
	h.mu.Lock()
	assert.Empty(t, h.cmds, "the last subscription forgets the workspace")
	h.mu.Unlock()
	c := h.Commands(dirs, func() {})
	defer c.Close()
	assert.Contains(t, names(c.Check()), "late")
}

// TestHub_InstructionsShared: equal loads are swapped for one snapshot;
// a changed one becomes the workspace's; nothing is kept once no session
// holds it.
func TestHub_InstructionsShared(t *testing.T) {
	ws := t.TempDir()
	mkfile(t, filepath.Join(ws, "AGENTS.md"), "Run the tests. @docs/style.md")
	mkfile(t, filepath.Join(ws, "docs", "style.md"), "Tabs.")
	o := instructions.Options{Roots: []string{ws}, Budget: 10000}
	key := InstructionsKey(o)
	h := NewHub(nil, commands.Builtins)
	load := func() *instructions.Loaded {
		l := instructions.Load(t.Context(), o)
		return &l
	}
	a := h.Instructions(key, load())
	b := h.Instructions(key, load())
	assert.Same(t, a, b)
	assert.NotSame(t, a, h.Instructions(InstructionsKey(instructions.Options{Roots: []string{ws}, Budget: 5000}), load()),
		"another budget is another key")

	mkfile(t, filepath.Join(ws, "docs", "style.md"), "Spaces.")
	c := h.Instructions(key, load())
	assert.NotSame(t, a, c)
	assert.Contains(t, c.Text(), "Spaces.")
	assert.Contains(t, a.Text(), "Tabs.", "an older session keeps what it loaded")
	assert.Same(t, c, h.Instructions(key, load()))

	runtime.KeepAlive(a)
	runtime.KeepAlive(b)
	runtime.KeepAlive(c)
	a, b, c = nil, nil, nil
	require.Eventually(t, func() bool {
		runtime.GC()
		h.mu.Lock()
		defer h.mu.Unlock()
		return len(h.instr) == 0
	}, 5*time.Second, 10*time.Millisecond, "snapshots nobody holds are forgotten")
}

// TestHub_AgentsShared: the sessions of one workspace share the agent
// files read once; a changed file is read again, and the new snapshot is
// shared in turn.
func TestHub_AgentsShared(t *testing.T) {
	ws := t.TempDir()
	mkfile(t, filepath.Join(ws, ".claude", "agents", "rev.md"), "---\nname: rev\ndescription: Reviews\n---\nReview it.")
	h := NewHub(nil, commands.Builtins)
	first := h.Agents(agents.Dirs([]string{ws}, ""))
	require.Len(t, first.Agents, 1)
	assert.Same(t, first, h.Agents(agents.Dirs([]string{ws}, "")), "read once for the workspace")
	mkfile(t, filepath.Join(ws, ".acpd", "agents", "ship.md"), "---\nname: ship\ndescription: Ships\n---\nShip it.")
	second := h.Agents(agents.Dirs([]string{ws}, ""))
	assert.NotSame(t, first, second)
	assert.Len(t, second.Agents, 2)
	assert.Same(t, second, h.Agents(agents.Dirs([]string{ws}, "")))
	runtime.KeepAlive(first)
}
