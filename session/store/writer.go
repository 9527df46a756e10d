package store

import (
	"errors"
	"fmt"
	"os"
	"sync"
	"time"

	"github.com/acpd/acpd/acp"
)

// Writer appends records to one session's transcript and holds the
// session's advisory lock until Close. It is safe for concurrent use.
type Writer struct {
	s  *Store
	id string

	mu       sync.Mutex
	f        *os.File
	size     int64 // bytes of whole records in the file
	info     entry // the session's index entry, kept current
	titled   bool  // a title record exists (a prompt no longer sets the title)
	dirty    bool  // written since the last fsync
	stale    bool  // written since the last index update
	lastSync time.Time
	timer    *time.Timer
	closed   bool
	buf      []byte
	syncs    int // fsyncs done; read by tests
}

func newWriter(s *Store, id string, f *os.File, size int64, e entry, titled bool) *Writer {
	e.Size = size
	return &Writer{s: s, id: id, f: f, size: size, info: e, titled: titled, lastSync: time.Now()}
}

// ID is the session id.
func (w *Writer) ID() string { return w.id }

// Append writes rec as one line with a single write. V and T are filled
// when zero. The record is durable at the next Sync, EndTurn or Close, and
// at most the store's SyncInterval later in any case.
func (w *Writer) Append(rec Record) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return ErrClosed
	}
	if rec.V == 0 {
		rec.V = Version
	}
	if rec.T.IsZero() {
		rec.T = w.s.now()
	}
	// UTC, which also drops the monotonic reading, so that a record and
	// its index entry compare equal to what a later Load reads.
	rec.T = rec.T.UTC()
	if rec.V != Version {
		return fmt.Errorf("%w: field v is %d, want %d", ErrInvalidRecord, rec.V, Version)
	}
	if err := rec.validate(); err != nil {
		return err
	}
	if rec.Kind == KindMeta && rec.Meta.ID != w.id {
		return fmt.Errorf("%w: field meta.id is %q, want %q", ErrInvalidRecord, rec.Meta.ID, w.id)
	}
	b, err := rec.encode(w.buf[:0])
	if err != nil {
		return fmt.Errorf("append to session %s: encode %s record: %w", w.id, rec.Kind, err)
	}
	w.buf = append(b, '\n')
	if err := w.writeRaw(w.buf); err != nil {
		return err
	}
	if cap(w.buf) > 1<<20 {
		w.buf = nil // don't pin a huge prompt's buffer for the session's life
	}

	indexNow := false
	switch rec.Kind {
	case KindTitle:
		w.info.Title, w.titled, indexNow = rec.Title, true, true
	case KindUser:
		if !w.titled && w.info.Title == "" {
			if t := TitleFromPrompt(rec.Prompt); t != "" {
				w.info.Title, indexNow = t, true
			}
		}
	case KindMeta:
		w.info.Cwd, w.info.AdditionalDirectories, indexNow = rec.Meta.Cwd, rec.Meta.AdditionalDirectories, true
	}
	if rec.T.After(w.info.UpdatedAt) {
		w.info.UpdatedAt = rec.T
	}
	w.scheduleSync()
	if indexNow && !w.s.idx.deferPut(w.id) {
		if err := w.updateIndexLocked(); err != nil {
			w.s.log.Warn("session index update failed", "session_id", w.id, "err", err)
		}
	}
	return nil
}

// writeRaw writes b at the end of the file. On a failed or short write it
// cuts the file back to the last whole record so that no partial line is
// left for the next record to follow. Callers hold w.mu.
func (w *Writer) writeRaw(b []byte) error {
	n, err := w.f.Write(b)
	if err != nil {
		if n > 0 {
			if terr := w.f.Truncate(w.size); terr != nil {
				err = errors.Join(err, fmt.Errorf("cut partial record: %w", terr))
			}
		}
		return fmt.Errorf("append to session %s: %w", w.id, err)
	}
	w.size += int64(n)
	w.info.Size = w.size
	w.dirty, w.stale = true, true
	return nil
}

// scheduleSync fsyncs now if the last sync is at least one interval old,
// else arms a one-shot timer for the rest of the interval. The timer runs
// no goroutine until it fires and is stopped by Sync and Close.
func (w *Writer) scheduleSync() {
	since := time.Since(w.lastSync)
	if since >= w.s.syncEach {
		if err := w.syncLocked(); err != nil {
			w.s.log.Warn("session fsync failed", "session_id", w.id, "err", err)
		}
		return
	}
	if w.timer == nil {
		w.timer = time.AfterFunc(w.s.syncEach-since, w.timerSync)
	}
}

func (w *Writer) timerSync() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.timer = nil
	if w.closed {
		return
	}
	if err := w.syncLocked(); err != nil {
		w.s.log.Warn("session fsync failed", "session_id", w.id, "err", err)
	}
}

// Sync makes every appended record durable (fsync).
func (w *Writer) Sync() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return ErrClosed
	}
	return w.syncLocked()
}

func (w *Writer) syncLocked() error {
	if w.timer != nil {
		w.timer.Stop()
		w.timer = nil
	}
	if !w.dirty {
		return nil
	}
	if err := w.f.Sync(); err != nil {
		return fmt.Errorf("sync session %s: %w", w.id, err)
	}
	w.dirty = false
	w.lastSync = time.Now()
	w.syncs++
	return nil
}

// EndTurn records the end of a turn (stopReason, or errMsg for a turn that
// failed), fsyncs, and updates the session's index entry (updatedAt).
func (w *Writer) EndTurn(stopReason acp.StopReason, errMsg string) error {
	if err := w.Append(Record{Kind: KindTurnEnd, StopReason: stopReason, Error: errMsg}); err != nil {
		return err
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return ErrClosed
	}
	if err := w.syncLocked(); err != nil {
		return err
	}
	return w.updateIndexLocked()
}

// Close fsyncs, updates the index, and releases the session's lock. It is
// idempotent.
func (w *Writer) Close() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return nil
	}
	err := w.syncLocked()
	if w.stale {
		err = errors.Join(err, w.updateIndexLocked())
	}
	w.closed = true
	return errors.Join(err, w.f.Close())
}

// abandon closes the file without syncing or indexing (failed setup).
func (w *Writer) abandon() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.timer != nil {
		w.timer.Stop()
		w.timer = nil
	}
	w.closed = true
	w.f.Close()
}

func (w *Writer) updateIndexLocked() error {
	if err := w.s.idx.put(w.info); err != nil {
		return err
	}
	w.stale = false
	return nil
}
