package confine

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
)

// OwnCopy gives the file at t a name of its own before a tool writes it,
// when it has other hard links. A hard link is the same file under another
// name, which may well be outside the workspace (pnpm's store, uv's cache
// and `git clone --local` link their files into a project): writing it in
// place would change that outside file too. So the file is copied to a
// temporary name beside it and renamed over it; the other names keep the
// old content, and the write then goes to the copy, locally or through
// the editor. A missing file, or one with a single name, is left as it is.
func (t Target) OwnCopy() error {
	f, err := t.Open(os.O_RDONLY, 0)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return err
	}
	n, ok := linkCount(fi)
	if !ok || n <= 1 || !fi.Mode().IsRegular() {
		return nil
	}
	if err := t.replaceWithCopy(f, fi.Mode().Perm()); err != nil {
		return fmt.Errorf("%s has %d hard links, and another name may be outside the workspace; "+
			"acpd writes such a file only after giving it a copy of its own, which failed: %w", t.path, n, err)
	}
	return nil
}

// replaceWithCopy writes what src holds to a new file beside t (mode
// perm) and renames it over t, all below t's root.
func (t Target) replaceWithCopy(src *os.File, perm fs.FileMode) error {
	r, _, done, err := t.useRoot()
	if err != nil {
		return err
	}
	defer done()
	var b [8]byte
	_, _ = rand.Read(b[:])
	tmp := filepath.Join(filepath.Dir(t.rel), "."+filepath.Base(t.rel)+".acpd-"+hex.EncodeToString(b[:]))
	dst, err := r.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL|oNoFollow|syscall.O_CLOEXEC, perm)
	if err != nil {
		return rootErr(err)
	}
	_, err = io.Copy(dst, src)
	if err == nil {
		// The mode asked for at create is cut by the umask.
		err = dst.Chmod(perm)
	}
	err = errors.Join(err, dst.Close())
	if err == nil {
		err = rootErr(r.Rename(tmp, t.rel))
	}
	if err != nil {
		_ = r.Remove(tmp)
	}
	return err
}
