package policy

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"github.com/acpd/acpd/session/store"
)

// The trust store is one file in acpd's state folder, never in a
// workspace: for each trusted workspace (its real path) the digest of the
// settings it was trusted with. A workspace whose settings no longer have
// that digest is not trusted: a `git pull` that changes a hook asks again.

// trustFileName is the trust store's name in the state folder.
const trustFileName = "trust.json"

type trustShape struct {
	Workspaces map[string]trustEntry `json:"workspaces"`
}

type trustEntry struct {
	Digest  string    `json:"digest"`
	Files   []string  `json:"files,omitempty"`
	Trusted time.Time `json:"trusted"`
}

// TrustFile is the trust store's path.
func TrustFile(stateDir string) string { return filepath.Join(stateDir, trustFileName) }

func readTrust(path string) (*trustShape, error) {
	t := &trustShape{}
	data, err := readBounded(path)
	if errors.Is(err, fs.ErrNotExist) {
		return t, nil
	}
	if err != nil {
		return nil, err
	}
	if err := json.Unmarshal(data, t); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return t, nil
}

// trustedDigest is the digest a workspace was trusted with ("" when it
// is not trusted).
func (e *Engine) trustedDigest(root string) string {
	if e.opts.StateDir == "" {
		return ""
	}
	t, err := readTrust(TrustFile(e.opts.StateDir))
	if err != nil {
		e.log.Warn("reading the trust store", "err", err)
		return ""
	}
	return t.Workspaces[root].Digest
}

// Trust trusts the workspace at dir with its settings as they are now,
// and returns them.
func (e *Engine) Trust(dir string) (*Project, error) {
	if e.opts.StateDir == "" {
		return nil, errors.New("no state folder to keep trust in")
	}
	w := e.Workspace(dir)
	p := loadProject(w.Root, e.opts.MCPImport)
	return p, e.trustDigest(w, p)
}

// trustDigest trusts the workspace with the settings p the user was
// shown.
func (e *Engine) trustDigest(w *Workspace, p *Project) error {
	if e.opts.StateDir == "" {
		return errors.New("no state folder to keep trust in")
	}
	err := updateTrust(TrustFile(e.opts.StateDir), func(t *trustShape) {
		t.Workspaces[w.Root] = trustEntry{Digest: p.Digest, Files: p.Files, Trusted: time.Now().UTC()}
	})
	w.Invalidate()
	return err
}

// Revoke forgets the trust of the workspace at dir; false when it was not
// trusted.
func (e *Engine) Revoke(dir string) (bool, error) {
	if e.opts.StateDir == "" {
		return false, nil
	}
	w := e.Workspace(dir)
	found := false
	err := updateTrust(TrustFile(e.opts.StateDir), func(t *trustShape) {
		_, found = t.Workspaces[w.Root]
		delete(t.Workspaces, w.Root)
	})
	w.Invalidate()
	return found, err
}

// updateTrust changes the trust store under its lock and replaces it by a
// rename.
func updateTrust(path string, change func(*trustShape)) error {
	return locked(filepath.Dir(path), ".trust.lock", func() error {
		t, err := readTrust(path)
		if err != nil {
			return err
		}
		if t.Workspaces == nil {
			t.Workspaces = map[string]trustEntry{}
		}
		change(t)
		data, err := json.MarshalIndent(t, "", "  ")
		if err != nil {
			return err
		}
		return replaceFile(path, append(data, '\n'))
	})
}

// locked runs fn holding the lock file name of dir (made, with dir, when
// missing), which two acpd processes share.
func locked(dir, name string, fn func() error) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	lock, err := os.OpenFile(filepath.Join(dir, name), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return err
	}
	defer lock.Close()
	if err := store.LockFile(lock); err != nil {
		return err
	}
	return fn()
}

// replaceFile writes data to a temporary file beside path and renames it
// over path: a reader sees the old content or the new, never half.
func replaceFile(path string, data []byte) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), ".tmp-*")
	if err != nil {
		return err
	}
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		os.Remove(tmp.Name())
		return err
	}
	if err := tmp.Close(); err != nil {
		os.Remove(tmp.Name())
		return err
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		os.Remove(tmp.Name())
		return err
	}
	return nil
}
