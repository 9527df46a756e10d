package store

import (
	"cmp"
	"encoding/base64"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	segjson "github.com/segmentio/encoding/json"
)

// SessionInfo is one session as listed.
type SessionInfo struct {
	ID                    string    `json:"id"`
	Cwd                   string    `json:"cwd"`
	AdditionalDirectories []string  `json:"additionalDirectories,omitempty"`
	Title                 string    `json:"title,omitempty"`
	CreatedAt             time.Time `json:"createdAt"`
	UpdatedAt             time.Time `json:"updatedAt"`
}

// entry is an index line: the listed info plus the transcript size it was
// computed from, which tells Open which files changed since.
type entry struct {
	SessionInfo
	Size int64 `json:"size"`
}

type indexFile struct {
	V        int     `json:"v"`
	Sessions []entry `json:"sessions"`
}

const (
	indexName     = "index.json"
	indexLockName = "index.lock"
	// DefaultPageSize is List's page size when ListOptions.Limit is 0.
	DefaultPageSize = 100
	// MaxPageSize caps ListOptions.Limit.
	MaxPageSize = 1000
)

// fileStamp identifies one version of a file or directory cheaply.
type fileStamp struct {
	ok    bool
	ino   uint64
	size  int64
	mtime int64
}

func stamp(path string) fileStamp {
	fi, err := os.Stat(path)
	if err != nil {
		return fileStamp{}
	}
	st := fileStamp{ok: true, size: fi.Size(), mtime: fi.ModTime().UnixNano()}
	st.ino = fileIno(fi)
	return st
}

// index is the in-memory copy of index.json. Every change is a
// read-modify-write of the file under an flock on index.lock, so Stores in
// several processes do not lose each other's updates. The sessions
// directory stays the truth: the index is reconciled with it on Open and
// whenever the directory changes.
type index struct {
	s        *Store
	path     string
	lockPath string

	mu      sync.Mutex
	entries map[string]entry
	sorted  []*entry // updatedAt desc, id asc; nil when stale
	file    fileStamp
	dir     fileStamp
	// While Open's background load runs (IndexInBackground), writers do
	// not wait for it: they leave the ids of the entries they would have
	// put in pending, and the load puts them (rescanned) before it ends.
	pendingMu sync.Mutex
	loading   bool
	pending   []string
	// deferred: the background load waits for startLoad (set by Open
	// before the store is shared, read-only after).
	deferred  bool
	startOnce sync.Once
}

// startLoad starts a deferred background load once. Every index operation
// calls it before it takes x.mu, which the waiting load holds.
func (x *index) startLoad() {
	if x.deferred {
		x.startOnce.Do(func() { go x.loadInBackground() })
	}
}

// deferPut records that id's entry should be put once the background load
// ends; false when no load is running (the caller puts it itself).
func (x *index) deferPut(id string) bool {
	x.startLoad()
	x.pendingMu.Lock()
	defer x.pendingMu.Unlock()
	if !x.loading {
		return false
	}
	x.pending = append(x.pending, id)
	return true
}

// loadInBackground runs the full open, then the deferred puts; the caller
// holds x.mu and set loading, and it releases both.
func (x *index) loadInBackground() {
	defer x.mu.Unlock()
	if err := x.openLocked(); err != nil {
		x.s.log.Warn("session index: opening failed; listing will retry", "dir", x.s.dir, "err", err)
	}
	for {
		x.pendingMu.Lock()
		ids := x.pending
		x.pending = nil
		if len(ids) == 0 {
			x.loading = false
			x.pendingMu.Unlock()
			return
		}
		x.pendingMu.Unlock()
		slices.Sort(ids)
		ids = slices.Compact(ids)
		err := x.withFileLock(func() error {
			for _, id := range ids {
				if e, err := x.scan(id); err == nil {
					x.entries[id] = e
				}
			}
			x.sorted = nil
			return x.writeLocked()
		})
		if err != nil {
			x.s.log.Warn("session index: update failed", "err", err)
		}
	}
}

func newIndex(s *Store) *index {
	return &index{
		s:        s,
		path:     filepath.Join(s.dir, indexName),
		lockPath: filepath.Join(s.dir, indexLockName),
		entries:  map[string]entry{},
	}
}

// open loads the index and reconciles it with every transcript file,
// rescanning files whose size differs from the indexed one.
func (x *index) open() error {
	x.mu.Lock()
	defer x.mu.Unlock()
	return x.openLocked()
}

func (x *index) openLocked() error {
	return x.withFileLock(func() error {
		x.readLocked()
		return x.reconcileLocked(true)
	})
}

// withFileLock runs fn holding the inter-process index lock.
func (x *index) withFileLock(fn func() error) error {
	f, err := os.OpenFile(x.lockPath, os.O_RDWR|os.O_CREATE, filePerm)
	if err != nil {
		return fmt.Errorf("session index lock: %w", err)
	}
	defer f.Close()
	if err := lockExclusive(f); err != nil {
		return fmt.Errorf("session index lock: %w", err)
	}
	return fn()
}

// readLocked loads index.json if it changed since last read. A missing or
// damaged file leaves the entries empty so reconciliation rebuilds them.
func (x *index) readLocked() bool {
	st := stamp(x.path)
	if st == x.file {
		return false
	}
	x.file = st
	x.sorted = nil
	x.entries = map[string]entry{}
	x.dir = fileStamp{} // force a reconcile against the files
	data, err := os.ReadFile(x.path)
	if errors.Is(err, fs.ErrNotExist) {
		return true
	}
	var f indexFile
	if err == nil {
		err = segjson.Unmarshal(data, &f)
	}
	if err == nil && f.V != Version {
		err = fmt.Errorf("index version %d, want %d", f.V, Version)
	}
	if err != nil {
		x.s.log.Warn("session index damaged; rebuilding from transcripts", "file", x.path, "err", err)
		return true
	}
	for _, e := range f.Sessions {
		if ValidateID(e.ID) != nil {
			continue
		}
		x.entries[e.ID] = e
	}
	return true
}

// reconcileLocked makes the entries match the transcript files when the
// sessions directory changed (or always when full). full also rescans
// files whose size differs from their entry (appended after the index was
// last written, e.g. before a crash). It writes the index when anything
// changed.
func (x *index) reconcileLocked(full bool) error {
	dst := stamp(x.s.sessDir)
	if !full && dst == x.dir && dst.ok {
		return nil
	}
	des, err := os.ReadDir(x.s.sessDir)
	if err != nil {
		return fmt.Errorf("read sessions dir: %w", err)
	}
	changed := false
	seen := make(map[string]bool, len(des))
	for _, de := range des {
		name := de.Name()
		id, ok := strings.CutSuffix(name, fileExt)
		if !ok || !de.Type().IsRegular() || ValidateID(id) != nil {
			continue
		}
		seen[id] = true
		old, have := x.entries[id]
		if have && !full {
			continue
		}
		if have {
			fi, err := de.Info()
			if err != nil || fi.Size() == old.Size {
				continue
			}
		}
		e, err := x.scan(id)
		if err != nil {
			x.s.log.Warn("session transcript unreadable; not listed", "session_id", id, "err", err)
			if have {
				delete(x.entries, id)
				changed = true
			}
			continue
		}
		x.entries[id] = e
		changed = true
	}
	for id := range x.entries {
		if !seen[id] {
			delete(x.entries, id)
			changed = true
		}
	}
	x.dir = dst
	if changed || !x.file.ok {
		x.sorted = nil
		return x.writeLocked()
	}
	return nil
}

func (x *index) scan(id string) (entry, error) {
	data, err := os.ReadFile(x.s.path(id))
	if err != nil {
		return entry{}, err
	}
	tr, _ := parse(id, data)
	if err := tr.finish(id); err != nil {
		return entry{}, err
	}
	// Size is the file's, so a damaged tail does not trigger a rescan on
	// every Open.
	return entry{SessionInfo: tr.info(), Size: int64(len(data))}, nil
}

// writeLocked replaces index.json atomically (temp file + rename). The
// index is a cache of the transcripts, so it is not fsynced: after a power
// cut Open reconciles it with the files.
func (x *index) writeLocked() error {
	// Sorting the ids, not the entries: an entry is a large struct to swap.
	ids := slices.Sorted(maps.Keys(x.entries))
	list := make([]entry, 0, len(ids))
	for _, id := range ids {
		list = append(list, x.entries[id])
	}
	data, err := segjson.Marshal(indexFile{V: Version, Sessions: list})
	if err != nil {
		return fmt.Errorf("encode session index: %w", err)
	}
	tmp, err := os.CreateTemp(x.s.dir, indexName+".tmp-*")
	if err != nil {
		return fmt.Errorf("write session index: %w", err)
	}
	_, err = tmp.Write(data)
	err = errors.Join(err, tmp.Chmod(filePerm), tmp.Close())
	if err == nil {
		err = os.Rename(tmp.Name(), x.path)
	}
	if err != nil {
		os.Remove(tmp.Name())
		return fmt.Errorf("write session index: %w", err)
	}
	x.file = stamp(x.path)
	return nil
}

// update applies fn to the entries as a locked read-modify-write.
func (x *index) update(fn func()) error {
	x.startLoad()
	x.mu.Lock()
	defer x.mu.Unlock()
	return x.withFileLock(func() error {
		x.readLocked()
		if !x.dir.ok {
			if err := x.reconcileLocked(false); err != nil {
				return err
			}
		}
		fn()
		x.sorted = nil
		return x.writeLocked()
	})
}

func (x *index) put(e entry) error {
	return x.update(func() { x.entries[e.ID] = e })
}

func (x *index) remove(id string) error {
	x.startLoad()
	x.mu.Lock()
	_, have := x.entries[id]
	x.mu.Unlock()
	if !have && !x.fileChanged() {
		return nil
	}
	return x.update(func() { delete(x.entries, id) })
}

func (x *index) fileChanged() bool {
	x.startLoad()
	x.mu.Lock()
	defer x.mu.Unlock()
	return stamp(x.path) != x.file
}

// ListOptions select a page of sessions.
type ListOptions struct {
	Cwd    string // exact match on the session's cwd (cleaned); "" lists all
	Cursor string // from a previous page's nextCursor; "" starts at the newest
	Limit  int    // page size; 0 means DefaultPageSize, capped at MaxPageSize
}

// List returns one page of sessions, most recently updated first (ties by
// id), and the cursor of the next page ("" after the last page). A cursor
// this store did not produce is ErrInvalidCursor.
func (s *Store) List(opts ListOptions) ([]SessionInfo, string, error) {
	limit := opts.Limit
	switch {
	case limit < 0:
		return nil, "", fmt.Errorf("list sessions: field limit is negative (%d)", limit)
	case limit == 0:
		limit = DefaultPageSize
	case limit > MaxPageSize:
		limit = MaxPageSize
	}
	var after *cursor
	if opts.Cursor != "" {
		c, err := decodeCursor(opts.Cursor)
		if err != nil {
			return nil, "", fmt.Errorf("list sessions: field cursor: %w", err)
		}
		after = &c
	}
	cwd := opts.Cwd
	if cwd != "" {
		cwd = filepath.Clean(cwd)
	}

	x := s.idx
	x.startLoad()
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.readLocked() || !x.dir.ok || stamp(s.sessDir) != x.dir {
		err := x.withFileLock(func() error {
			x.readLocked()
			return x.reconcileLocked(false)
		})
		if err != nil {
			return nil, "", fmt.Errorf("list sessions: %w", err)
		}
	}
	if x.sorted == nil {
		x.sorted = make([]*entry, 0, len(x.entries))
		for id := range x.entries {
			e := x.entries[id]
			x.sorted = append(x.sorted, &e)
		}
		slices.SortFunc(x.sorted, func(a, b *entry) int {
			return compareEntries(a.UpdatedAt.UnixNano(), a.ID, b.UpdatedAt.UnixNano(), b.ID)
		})
	}
	start := 0
	if after != nil {
		start, _ = slices.BinarySearchFunc(x.sorted, *after, func(e *entry, c cursor) int {
			if r := compareEntries(e.UpdatedAt.UnixNano(), e.ID, c.updated, c.id); r != 0 {
				return r
			}
			return -1 // the cursor's own entry comes before the page
		})
	}
	page := make([]SessionInfo, 0, min(limit, len(x.sorted)-start))
	next := ""
	for _, e := range x.sorted[start:] {
		if cwd != "" && e.Cwd != cwd {
			continue
		}
		if len(page) == limit {
			last := page[len(page)-1]
			next = cursor{updated: last.UpdatedAt.UnixNano(), id: last.ID}.encode()
			break
		}
		info := e.SessionInfo
		info.AdditionalDirectories = slices.Clone(info.AdditionalDirectories)
		page = append(page, info)
	}
	return page, next, nil
}

// compareEntries orders newest first, then by id.
func compareEntries(au int64, aid string, bu int64, bid string) int {
	if r := cmp.Compare(bu, au); r != 0 {
		return r
	}
	return strings.Compare(aid, bid)
}

// cursor is the sort key of the last session of a page.
type cursor struct {
	updated int64
	id      string
}

const cursorPrefix = "c1."

func (c cursor) encode() string {
	return cursorPrefix + base64.RawURLEncoding.EncodeToString([]byte(strconv.FormatInt(c.updated, 10)+":"+c.id))
}

func decodeCursor(s string) (cursor, error) {
	body, ok := strings.CutPrefix(s, cursorPrefix)
	if !ok {
		return cursor{}, fmt.Errorf("%w: unknown format", ErrInvalidCursor)
	}
	raw, err := base64.RawURLEncoding.DecodeString(body)
	if err != nil {
		return cursor{}, fmt.Errorf("%w: not base64url", ErrInvalidCursor)
	}
	ts, id, ok := strings.Cut(string(raw), ":")
	if !ok {
		return cursor{}, fmt.Errorf("%w: malformed", ErrInvalidCursor)
	}
	u, err := strconv.ParseInt(ts, 10, 64)
	if err != nil || ValidateID(id) != nil {
		return cursor{}, fmt.Errorf("%w: malformed", ErrInvalidCursor)
	}
	return cursor{updated: u, id: id}, nil
}
