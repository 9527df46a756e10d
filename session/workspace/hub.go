// Package workspace shares what sessions read from their workspace among
// all the sessions of a process, so that an idle session costs neither CPU
// nor a copy of its project's facts:
//
//   - the command set of each distinct list of command folders is loaded
//     once and shared; one Watcher (inotify, one goroutine for the whole
//     process) sees the folders change and has the set reloaded once and
//     every session told, instead of each session polling its folders;
//   - the instruction files a session loaded are swapped for an equal
//     snapshot another session of the workspace already holds;
//   - the agent files of each distinct list of agent folders are read once
//     per change and shared, checked (paths, sizes, times) when a session
//     starts a prompt.
//
// The environment block is shared by content, with package unique, where
// the session builds it.
package workspace

import (
	"log/slog"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"weak"

	"github.com/acpd/acpd/session/agents"
	"github.com/acpd/acpd/session/commands"
	"github.com/acpd/acpd/session/instructions"
)

// Hub holds the shared snapshots of one Manager's sessions.
type Hub struct {
	log      *slog.Logger
	builtins func() []*commands.Command
	w        *Watcher

	mu     sync.Mutex
	cmds   map[string]*cmdEntry
	instr  map[string]weak.Pointer[instructions.Loaded]
	agents map[string]weak.Pointer[agents.Loaded]
	// agentLoad makes one load of agent files at a time: sessions of a
	// workspace starting prompts together read the files once.
	agentLoad sync.Mutex
}

// NewHub returns a Hub whose command sets start with builtins().
func NewHub(log *slog.Logger, builtins func() []*commands.Command) *Hub {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Hub{log: log, builtins: builtins, w: process(),
		cmds: map[string]*cmdEntry{}, instr: map[string]weak.Pointer[instructions.Loaded]{},
		agents: map[string]weak.Pointer[agents.Loaded]{}}
}

// cmdEntry is the command set of one list of command folders.
type cmdEntry struct {
	key   string
	dirs  []commands.Dir
	load  sync.Mutex // one load at a time
	set   atomic.Pointer[commands.Set]
	subs  map[*Commands]struct{} // guarded by Hub.mu
	watch *Watch
}

// Commands is one session's view of its workspace's command set, until
// Close.
type Commands struct {
	h        *Hub
	e        *cmdEntry
	onChange func()
}

// Commands subscribes to the command set of dirs: onChange runs (on a
// goroutine of its own) each time the set is reloaded because the files
// changed.
func (h *Hub) Commands(dirs []commands.Dir, onChange func()) *Commands {
	key := dirsKey(dirs)
	h.mu.Lock()
	defer h.mu.Unlock()
	e := h.cmds[key]
	if e == nil {
		e = &cmdEntry{key: key, dirs: dirs, subs: map[*Commands]struct{}{}}
		trees := make([]string, len(dirs))
		for i, d := range dirs {
			trees[i] = d.Path
		}
		var err error
		if e.watch, err = h.w.Watch(trees, func() { h.refresh(e) }); err != nil {
			h.log.Warn("command folders are not watched; their changes are seen at the next prompt", "err", err)
		}
		h.cmds[key] = e
	}
	c := &Commands{h: h, e: e, onChange: onChange}
	e.subs[c] = struct{}{}
	return c
}

func dirsKey(dirs []commands.Dir) string {
	return folderKey(len(dirs), func(i int) (string, string) { return dirs[i].Path, string(dirs[i].Source) })
}

// folderKey identifies a list of n definition folders, folder i being
// at(i): its path and source.
func folderKey(n int, at func(i int) (path, source string)) string {
	var b strings.Builder
	for i := range n {
		p, src := at(i)
		b.WriteString(p)
		b.WriteByte(0)
		b.WriteString(src)
		b.WriteByte(0)
	}
	return b.String()
}

// Check returns the current command set: it looks at the command files
// (paths, sizes and times; nothing is read) and loads the set the first
// time or when they changed, telling every subscriber.
func (c *Commands) Check() *commands.Set {
	c.h.refresh(c.e)
	return c.e.set.Load()
}

// refresh (re)loads e's set when it was never loaded or its files changed,
// and tells the subscribers about a change.
func (h *Hub) refresh(e *cmdEntry) {
	e.load.Lock()
	defer e.load.Unlock()
	old := e.set.Load()
	if old != nil && commands.Stamp(e.dirs) == old.Stamp() {
		return
	}
	// Its warnings are each session's to tell (package notice).
	set := commands.NewSet(h.builtins(), commands.Load(e.dirs))
	e.set.Store(set)
	if old == nil {
		return // the first load: each subscriber asks for it
	}
	h.mu.Lock()
	subs := make([]*Commands, 0, len(e.subs))
	for c := range e.subs {
		subs = append(subs, c)
	}
	h.mu.Unlock()
	for _, c := range subs {
		go c.onChange()
	}
}

// Close ends the subscription; the last one of a set stops watching its
// folders.
func (c *Commands) Close() {
	h, e := c.h, c.e
	h.mu.Lock()
	delete(e.subs, c)
	var w *Watch
	if len(e.subs) == 0 && h.cmds[e.key] == e {
		delete(h.cmds, e.key)
		w = e.watch
	}
	h.mu.Unlock()
	if w != nil {
		w.Close()
	}
}

// Idle reports whether no session subscribes to any command set.
func (h *Hub) Idle() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.cmds) == 0
}

// InstructionsKey identifies what an instructions.Load of o reads.
func InstructionsKey(o instructions.Options) string {
	return strings.Join(o.Roots, "\x00") + "\x01" + strings.Join(o.FileNames, "\x00") + "\x01" +
		o.GlobalDir + "\x01" + strconv.Itoa(o.Budget)
}

// Instructions returns l, or an equal snapshot that a session with the
// same key holds already, so sessions share one copy. Nothing is kept for
// a key once no session holds its snapshot.
func (h *Hub) Instructions(key string, l *instructions.Loaded) *instructions.Loaded {
	h.mu.Lock()
	defer h.mu.Unlock()
	if cur := h.instr[key].Value(); cur != nil && equalLoaded(cur, l) {
		return cur
	}
	keepWeak(h, h.instr, key, l)
	return l
}

// keepWeak makes v the snapshot of key in m (a map of h's, guarded by
// h.mu, which the caller holds), until v is collected: then key is
// forgotten, unless another snapshot took its place.
func keepWeak[T any](h *Hub, m map[string]weak.Pointer[T], key string, v *T) {
	m[key] = weak.Make(v)
	runtime.AddCleanup(v, func(key string) {
		h.mu.Lock()
		defer h.mu.Unlock()
		if m[key].Value() == nil {
			delete(m, key)
		}
	}, key)
}

func equalLoaded(a, b *instructions.Loaded) bool {
	return slices.Equal(a.Warnings, b.Warnings) && slices.Equal(a.Sources, b.Sources) &&
		slices.EqualFunc(a.Files, b.Files, func(x, y instructions.File) bool {
			return x.Path == y.Path && x.Text == y.Text && x.Truncated == y.Truncated && slices.Equal(x.Imports, y.Imports)
		})
}

// Agents returns the agent files of dirs: the snapshot another session
// loaded, when the files have not changed since (nothing is read to tell),
// else a fresh load, shared from then on. Nothing is kept for folders once
// no session holds their snapshot. Agents need no watch: they are read
// only when a prompt starts, which checks them then.
func (h *Hub) Agents(dirs []agents.Dir) *agents.Loaded {
	key := folderKey(len(dirs), func(i int) (string, string) { return dirs[i].Path, string(dirs[i].Source) })
	h.agentLoad.Lock()
	defer h.agentLoad.Unlock()
	h.mu.Lock()
	cur := h.agents[key].Value()
	h.mu.Unlock()
	if cur != nil && agents.Stamp(dirs) == cur.Stamp {
		return cur
	}
	// Its warnings are each session's to tell (package notice).
	l := agents.Load(dirs)
	h.mu.Lock()
	keepWeak(h, h.agents, key, l)
	h.mu.Unlock()
	return l
}
