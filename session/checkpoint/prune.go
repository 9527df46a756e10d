package checkpoint

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// PruneResult is what Prune removed.
type PruneResult struct {
	Removed    []string // session ids whose checkpoints were removed
	Freed      int64
	Total      int64 // the store's size after pruning
	InUseSkips int   // packs another process holds, left alone
}

// Prune removes whole sessions' checkpoints, the least recently written
// first, until the store holds at most maxBytes. The sessions this process
// has open (a running turn's among them) and packs another acpd holds are
// never removed, so a running session always keeps its latest checkpoint.
func (s *Store) Prune(maxBytes int64) (PruneResult, error) {
	var res PruneResult
	ents, err := os.ReadDir(s.dir)
	if err != nil {
		return res, err
	}
	type packFile struct {
		id   string
		size int64
		mod  int64
	}
	var packs []packFile
	for _, e := range ents {
		id, ok := strings.CutSuffix(e.Name(), ".pack")
		if !ok || !e.Type().IsRegular() || validSession(id) != nil {
			continue
		}
		fi, err := e.Info()
		if err != nil {
			continue
		}
		packs = append(packs, packFile{id, fi.Size(), fi.ModTime().UnixNano()})
		res.Total += fi.Size()
	}
	slices.SortFunc(packs, func(a, b packFile) int {
		switch {
		case a.mod < b.mod:
			return -1
		case a.mod > b.mod:
			return 1
		}
		return strings.Compare(a.id, b.id)
	})
	for _, p := range packs {
		if res.Total <= maxBytes {
			break
		}
		s.mu.Lock()
		_, open := s.packs[p.id]
		s.mu.Unlock()
		if open {
			continue
		}
		path := filepath.Join(s.dir, p.id+".pack")
		f, err := os.OpenFile(path, os.O_RDWR, 0)
		if err != nil {
			continue
		}
		if !tryLockExclusive(f) {
			f.Close()
			res.InUseSkips++
			continue
		}
		err = os.Remove(path)
		f.Close()
		if err != nil {
			return res, err
		}
		res.Removed = append(res.Removed, p.id)
		res.Freed += p.size
		res.Total -= p.size
	}
	return res, nil
}
