package checkpoint

import (
	"bytes"
	"fmt"
	"io/fs"
	"path/filepath"
	"slices"
	"strings"
)

// FileChange is one path a turn changed, with its line counts.
type FileChange struct {
	Path                 string
	Before, After        Entry
	Added, Removed       int
	Binary               bool
	Created, Deleted     bool
	beforeData, afterDat []byte
}

// Changes lists what the checkpointed turn changed: its before state
// against its after state (or, for a turn cut off by a crash, the state
// now).
func (s *Store) Changes(cp *Checkpoint) ([]FileChange, error) {
	pk, err := s.pack(cp.Session, false)
	if err != nil {
		return nil, err
	}
	befores := map[string]Entry{}
	afters := map[string]Entry{}
	for p, e := range cp.Files {
		befores[p] = e
		if a, ok := cp.AfterFiles[p]; ok && cp.Ended {
			afters[p] = a
		} else if a, err := s.state(p, nil); err == nil {
			afters[p] = a
		}
	}
	for root, id := range cp.Trees {
		bt, err := loadTree(pk, id)
		if err != nil {
			return nil, err
		}
		var at tree
		if aid := cp.AfterTrees[root]; cp.Ended && aid != "" {
			if at, err = loadTree(pk, aid); err != nil {
				return nil, err
			}
		} else if at, err = s.walk(root, nil); err != nil {
			return nil, err
		}
		for rel, e := range bt {
			p := filepath.Join(root, filepath.FromSlash(rel))
			if _, ok := befores[p]; !ok {
				befores[p] = e
				a, ok := at[rel]
				if !ok {
					a = absent
				}
				afters[p] = a
			}
		}
		for rel, e := range at {
			p := filepath.Join(root, filepath.FromSlash(rel))
			if _, ok := befores[p]; !ok {
				befores[p], afters[p] = absent, e
			}
		}
	}
	var out []FileChange
	for p, b := range befores {
		a := afters[p]
		if b.same(a) || (b.Type == TypeDir && a.Type == TypeDir) {
			continue
		}
		if b.Type == TypeDir || a.Type == TypeDir {
			continue // folders are listed through their files
		}
		fc := FileChange{Path: p, Before: b, After: a, Created: b.Type == TypeAbsent, Deleted: a.Type == TypeAbsent}
		bd, err1 := entryText(pk, b)
		ad, err2 := entryText(pk, a)
		if err1 != nil || err2 != nil {
			fc.Binary = true
		} else if isBinary(bd) || isBinary(ad) {
			fc.Binary = true
		} else {
			fc.beforeData, fc.afterDat = bd, ad
			r, add := lineDiff(lines(bd), lines(ad))
			fc.Removed, fc.Added = len(r.old), len(add)
		}
		out = append(out, fc)
	}
	slices.SortFunc(out, func(a, b FileChange) int { return strings.Compare(a.Path, b.Path) })
	return out, nil
}

func entryText(pk *pack, e Entry) ([]byte, error) {
	switch e.Type {
	case TypeFile:
		if pk == nil {
			return nil, fs.ErrNotExist
		}
		return pk.get(e.ID)
	case TypeSymlink:
		return []byte("-> " + e.Target + "\n"), nil
	}
	return nil, nil
}

func isBinary(b []byte) bool { return bytes.IndexByte(b[:min(len(b), 8000)], 0) >= 0 }

func lines(b []byte) []string {
	if len(b) == 0 {
		return nil
	}
	ls := strings.SplitAfter(string(b), "\n")
	if ls[len(ls)-1] == "" {
		ls = ls[:len(ls)-1]
	}
	return ls
}

// hunk is the changed middle of two line lists: the lines from start on
// that differ once the common head and tail are set aside.
type hunk struct {
	start int
	old   []string
}

// lineDiff sets aside the common first and last lines and returns the
// differing middle: old lines removed, new lines added. A one-hunk diff is
// exact for the usual edit (one region changed) and an upper bound
// otherwise.
func lineDiff(a, b []string) (hunk, []string) {
	pre := 0
	for pre < len(a) && pre < len(b) && a[pre] == b[pre] {
		pre++
	}
	suf := 0
	for suf < len(a)-pre && suf < len(b)-pre && a[len(a)-1-suf] == b[len(b)-1-suf] {
		suf++
	}
	return hunk{start: pre, old: a[pre : len(a)-suf]}, b[pre : len(b)-suf]
}

// Unified renders the change as a unified diff of one hunk with up to
// three lines of context.
func (fc FileChange) Unified() string {
	var b strings.Builder
	from, to := "a"+fc.Path, "b"+fc.Path
	if fc.Created {
		from = "/dev/null"
	}
	if fc.Deleted {
		to = "/dev/null"
	}
	fmt.Fprintf(&b, "--- %s\n+++ %s\n", from, to)
	if fc.Binary {
		b.WriteString("Binary files differ\n")
		return b.String()
	}
	a, n := lines(fc.beforeData), lines(fc.afterDat)
	h, added := lineDiff(a, n)
	ctx := 3
	s := max(h.start-ctx, 0)
	endOld := min(h.start+len(h.old)+ctx, len(a))
	tail := endOld - (h.start + len(h.old))
	oldLen := endOld - s
	newLen := (h.start - s) + len(added) + tail
	fmt.Fprintf(&b, "@@ -%d,%d +%d,%d @@\n", s+1, oldLen, s+1, newLen)
	write := func(prefix string, ls []string) {
		for _, l := range ls {
			b.WriteString(prefix)
			b.WriteString(l)
			if !strings.HasSuffix(l, "\n") {
				b.WriteString("\n\\ No newline at end of file\n")
			}
		}
	}
	write(" ", a[s:h.start])
	write("-", h.old)
	write("+", added)
	write(" ", a[h.start+len(h.old):endOld])
	return b.String()
}
