// Package store keeps acpd session transcripts: one append-only JSONL file
// per session under <dataDir>/sessions, plus an index (<dataDir>/index.json)
// that lists sessions quickly and is rebuilt from the files when it is
// missing or damaged.
//
// A Writer owns a session file while the session is active: it holds an
// advisory lock, writes each record with one write(2) (so a killed process
// leaves every record whole or absent), and fsyncs at every turn end and at
// most SyncInterval after any unsynced write.
package store

import (
	"crypto/rand"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"time"
)

// Errors the host maps to ACP codes (see the package README).
var (
	// ErrInvalidID: a session id outside ^[A-Za-z0-9_-]{1,128}$.
	ErrInvalidID = errors.New("invalid session id")
	// ErrLocked: another Writer (in this or another process) holds the session.
	ErrLocked = errors.New("session is in use by another acpd process")
	// ErrNotFound: no transcript for the id.
	ErrNotFound = errors.New("session not found")
	// ErrExists: Create with an id that already has a transcript.
	ErrExists = errors.New("session already exists")
	// ErrInvalidCursor: a List cursor this store did not produce.
	ErrInvalidCursor = errors.New("invalid cursor")
	// ErrClosed: use of a Writer after Close.
	ErrClosed = errors.New("session writer is closed")
	// ErrNoMeta: a transcript whose first readable record is not a meta record.
	ErrNoMeta = errors.New("transcript has no session meta record")
)

// LockedError is returned when a session is locked by another Writer; it
// matches ErrLocked with errors.Is.
type LockedError struct{ ID string }

func (e *LockedError) Error() string {
	return fmt.Sprintf("session %s is in use by another acpd process", e.ID)
}

// Is reports whether target is ErrLocked.
func (e *LockedError) Is(target error) bool { return target == ErrLocked }

// GuardDir is the folder of the data directory where `acpd guard` keeps the
// transcripts of the agents it watches: a store of its own, so they never
// show in acpd's session/list or get loaded as acpd sessions.
const GuardDir = "guard"

const (
	sessionsDir = "sessions"
	fileExt     = ".jsonl"
	dirPerm     = 0o700
	filePerm    = 0o600
	// DefaultSyncInterval bounds how long a written record may stay unsynced.
	DefaultSyncInterval = time.Second
)

// ValidateID reports whether id is usable as a session id: it must match
// ^[A-Za-z0-9_-]{1,128}$, which keeps it inside the data directory.
func ValidateID(id string) error {
	if !validID(id) {
		if len(id) > 40 {
			id = id[:40] + "…"
		}
		return fmt.Errorf("%w %q: want 1-128 characters from A-Z a-z 0-9 _ -", ErrInvalidID, id)
	}
	return nil
}

// validID is ^[A-Za-z0-9_-]{1,128}$ as a loop: the regexp's bounded
// repetition compiled to 128 states at every process start.
func validID(id string) bool {
	if len(id) == 0 || len(id) > 128 {
		return false
	}
	for i := 0; i < len(id); i++ {
		c := id[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}

// NewID returns a fresh random session id (128 bits, base32, 26 characters).
func NewID() string { return rand.Text() }

// Options configure a Store. The zero value is usable.
type Options struct {
	// Logger receives warnings (repairs, damaged index). Nil discards.
	Logger *slog.Logger
	// Now stamps records whose T is zero. Nil means time.Now.
	Now func() time.Time
	// SyncInterval bounds the time a written record stays unsynced during a
	// turn. Zero means DefaultSyncInterval.
	SyncInterval time.Duration
	// IndexInBackground loads and reconciles the index in a goroutine
	// instead of in Open, so a daemon answers initialize without reading
	// thousands of transcripts' sizes first; index operations wait for it.
	// Its failure is logged and met again by the first operation.
	IndexInBackground bool
	// DeferIndexLoad is IndexInBackground with the load started later: by
	// LoadIndex, or by the first operation that needs the index (List, a
	// writer's index update, Delete), whichever comes first. A daemon uses
	// it to answer initialize before the index competes with it for the
	// CPU, then starts the load.
	DeferIndexLoad bool
}

// Store is a directory of session transcripts. It is safe for concurrent
// use; several Stores (or processes) may share a directory.
type Store struct {
	dir      string
	sessDir  string
	log      *slog.Logger
	now      func() time.Time
	syncEach time.Duration
	idx      *index
}

// Open prepares dir (creating dir and dir/sessions with mode 0700) and loads
// or rebuilds the index.
func Open(dir string, opts Options) (*Store, error) {
	if dir == "" {
		return nil, errors.New("open session store: data dir is empty")
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("open session store %s: %w", dir, err)
	}
	s := &Store{
		dir:      abs,
		sessDir:  filepath.Join(abs, sessionsDir),
		log:      opts.Logger,
		now:      opts.Now,
		syncEach: opts.SyncInterval,
	}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	if s.now == nil {
		s.now = time.Now
	}
	if s.syncEach <= 0 {
		s.syncEach = DefaultSyncInterval
	}
	if err := os.MkdirAll(s.sessDir, dirPerm); err != nil {
		return nil, fmt.Errorf("open session store %s: %w", abs, err)
	}
	// MkdirAll keeps the mode of directories that already exist; the
	// sessions directory is ours, so tighten it.
	if err := os.Chmod(s.sessDir, dirPerm); err != nil {
		return nil, fmt.Errorf("open session store %s: %w", abs, err)
	}
	s.idx = newIndex(s)
	if opts.IndexInBackground || opts.DeferIndexLoad {
		// Taken here, so every index operation waits for the load.
		s.idx.mu.Lock()
		s.idx.loading = true
		s.idx.deferred = opts.DeferIndexLoad
		if !opts.DeferIndexLoad {
			go s.idx.loadInBackground()
		}
		return s, nil
	}
	if err := s.idx.open(); err != nil {
		return nil, fmt.Errorf("open session store %s: %w", abs, err)
	}
	return s, nil
}

// LoadIndex starts the index load that Options.DeferIndexLoad put off; it
// does nothing when the load has started or was not deferred. It does not
// wait for the load.
func (s *Store) LoadIndex() { s.idx.startLoad() }

// Dir is the store's absolute data directory.
func (s *Store) Dir() string { return s.dir }

func (s *Store) path(id string) string { return filepath.Join(s.sessDir, id+fileExt) }

// Path is the transcript file of session id (what hooks are told as
// transcript_path).
func (s *Store) Path(id string) string { return s.path(id) }

// Exists reports whether a transcript file exists for id.
func (s *Store) Exists(id string) bool {
	if ValidateID(id) != nil {
		return false
	}
	_, err := os.Stat(s.path(id))
	return err == nil
}

// Create starts a new session transcript with meta as its first record and
// returns its Writer. An empty meta.ID gets NewID(); a zero CreatedAt gets
// the current time. Cwd must be absolute.
func (s *Store) Create(meta SessionMeta) (*Writer, error) {
	if meta.ID == "" {
		meta.ID = NewID()
	}
	if err := ValidateID(meta.ID); err != nil {
		return nil, fmt.Errorf("create session: %w", err)
	}
	if !filepath.IsAbs(meta.Cwd) {
		return nil, fmt.Errorf("create session %s: field cwd %q is not an absolute path", meta.ID, meta.Cwd)
	}
	meta.Cwd = filepath.Clean(meta.Cwd)
	if meta.CreatedAt.IsZero() {
		meta.CreatedAt = s.now()
	}
	meta.CreatedAt = meta.CreatedAt.UTC()
	p := s.path(meta.ID)
	f, err := os.OpenFile(p, os.O_RDWR|os.O_CREATE|os.O_EXCL|os.O_APPEND, filePerm)
	if errors.Is(err, fs.ErrExist) {
		return nil, fmt.Errorf("create session %s: %w", meta.ID, ErrExists)
	}
	if err != nil {
		return nil, fmt.Errorf("create session %s: %w", meta.ID, err)
	}
	if err := lockFile(f, meta.ID); err != nil {
		f.Close()
		return nil, fmt.Errorf("create session: %w", err)
	}
	w := newWriter(s, meta.ID, f, 0, entry{SessionInfo: SessionInfo{
		ID: meta.ID, Cwd: meta.Cwd, AdditionalDirectories: meta.AdditionalDirectories,
		CreatedAt: meta.CreatedAt, UpdatedAt: meta.CreatedAt,
	}}, false)
	m := meta
	if err := w.Append(Record{Kind: KindMeta, T: meta.CreatedAt, Meta: &m}); err != nil {
		w.abandon()
		os.Remove(p)
		return nil, fmt.Errorf("create session %s: %w", meta.ID, err)
	}
	if err := w.Sync(); err != nil {
		w.abandon()
		os.Remove(p)
		return nil, fmt.Errorf("create session %s: %w", meta.ID, err)
	}
	// The meta record put the session in the index (Append), or left it
	// to the background load still running.
	syncDir(s.sessDir)
	return w, nil
}

// OpenWriter locks an existing session for appending. See Resume.
func (s *Store) OpenWriter(id string) (*Writer, error) {
	w, _, err := s.Resume(id)
	return w, err
}

// Resume locks an existing session, loads its transcript and returns a
// Writer that appends to it. A torn or corrupt tail, or everything from a
// corrupt line in the middle on, is moved to <id>.jsonl.damaged-<unixnano>
// and cut from the transcript, so new records follow the last good one.
func (s *Store) Resume(id string) (*Writer, *Transcript, error) {
	if err := ValidateID(id); err != nil {
		return nil, nil, fmt.Errorf("resume session: %w", err)
	}
	p := s.path(id)
	f, err := os.OpenFile(p, os.O_RDWR|os.O_APPEND, 0)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil, fmt.Errorf("resume session %s: %w", id, ErrNotFound)
	}
	if err != nil {
		return nil, nil, fmt.Errorf("resume session %s: %w", id, err)
	}
	fail := func(err error) (*Writer, *Transcript, error) {
		f.Close() // also drops the lock
		return nil, nil, fmt.Errorf("resume session %s: %w", id, err)
	}
	if err := lockFile(f, id); err != nil {
		return fail(err)
	}
	// A Delete may have unlinked the file between our open and our lock.
	if same, err := sameFile(f, p); err != nil || !same {
		return fail(ErrNotFound)
	}
	data, err := readAll(f)
	if err != nil {
		return fail(err)
	}
	tr, pr := parse(id, data)
	if err := tr.finish(id); err != nil {
		return fail(err)
	}
	size := int64(len(data))
	if pr.goodLen < size {
		if err := s.cutTail(f, id, data, pr.goodLen); err != nil {
			return fail(err)
		}
		size = pr.goodLen
	}
	e := entry{SessionInfo: tr.info(), Size: size}
	w := newWriter(s, id, f, size, e, tr.explicitTitle)
	if pr.needNewline {
		// The last record is whole but its newline was lost; terminate it so
		// the next record starts on its own line.
		if err := w.writeRaw([]byte{'\n'}); err != nil {
			w.abandon()
			return nil, nil, fmt.Errorf("resume session %s: %w", id, err)
		}
	}
	return w, tr, nil
}

// cutTail saves data[good:] next to the transcript and truncates the file
// to good bytes.
func (s *Store) cutTail(f *os.File, id string, data []byte, good int64) error {
	bad := filepath.Join(s.sessDir, fmt.Sprintf("%s%s.damaged-%d", id, fileExt, time.Now().UnixNano()))
	if err := os.WriteFile(bad, data[good:], filePerm); err != nil {
		return fmt.Errorf("save damaged tail: %w", err)
	}
	if err := f.Truncate(good); err != nil {
		return fmt.Errorf("cut damaged tail: %w", err)
	}
	if err := f.Sync(); err != nil {
		return fmt.Errorf("cut damaged tail: %w", err)
	}
	s.log.Warn("session transcript damaged; tail moved aside", "session_id", id, "kept_bytes", good,
		"moved_bytes", int64(len(data))-good, "file", bad)
	return nil
}

// Load reads a session's transcript without locking it. Damage is reported
// in Transcript.Warnings, not as an error: a torn or corrupt last line is
// skipped, and a corrupt line in the middle stops the load there
// (Transcript.CorruptLine names it) with the records before it returned.
func (s *Store) Load(id string) (*Transcript, error) {
	if err := ValidateID(id); err != nil {
		return nil, fmt.Errorf("load session: %w", err)
	}
	data, err := os.ReadFile(s.path(id))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("load session %s: %w", id, ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("load session %s: %w", id, err)
	}
	tr, _ := parse(id, data)
	if err := tr.finish(id); err != nil {
		return nil, fmt.Errorf("load session %s: %w", id, err)
	}
	return tr, nil
}

// Delete removes a session's transcript and its index entry. An unknown id
// is not an error; a session held by a Writer (Close it first) is ErrLocked.
func (s *Store) Delete(id string) error {
	if err := ValidateID(id); err != nil {
		return fmt.Errorf("delete session: %w", err)
	}
	p := s.path(id)
	f, err := os.OpenFile(p, os.O_RDWR, 0)
	switch {
	case errors.Is(err, fs.ErrNotExist):
	case err != nil:
		return fmt.Errorf("delete session %s: %w", id, err)
	default:
		defer f.Close()
		if err := lockFile(f, id); err != nil {
			return fmt.Errorf("delete session: %w", err)
		}
		if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("delete session %s: %w", id, err)
		}
		damaged, _ := filepath.Glob(filepath.Join(s.sessDir, id+fileExt+".damaged-*"))
		for _, d := range damaged {
			os.Remove(d)
		}
		syncDir(s.sessDir)
	}
	if err := s.idx.remove(id); err != nil {
		return fmt.Errorf("delete session %s: %w", id, err)
	}
	return nil
}

func lockFile(f *os.File, id string) error {
	locked, err := tryLockExclusive(f)
	switch {
	case err != nil:
		return fmt.Errorf("lock session %s: %w", id, err)
	case !locked:
		return &LockedError{ID: id}
	}
	return nil
}

func sameFile(f *os.File, path string) (bool, error) {
	a, err := f.Stat()
	if err != nil {
		return false, err
	}
	b, err := os.Stat(path)
	if err != nil {
		return false, err
	}
	return os.SameFile(a, b), nil
}

func readAll(f *os.File) ([]byte, error) {
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	buf := make([]byte, st.Size())
	n, err := f.ReadAt(buf, 0)
	if err != nil && n < len(buf) {
		return nil, err
	}
	return buf[:n], nil
}

// syncDir makes a created, renamed or removed directory entry durable. It is
// best effort: some file systems refuse fsync on directories.
func syncDir(dir string) {
	d, err := os.Open(dir)
	if err != nil {
		return
	}
	_ = d.Sync()
	d.Close()
}
