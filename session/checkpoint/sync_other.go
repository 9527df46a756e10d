//go:build !linux

package checkpoint

import (
	"os"
	"path/filepath"
)

// syncFiles makes the files just written durable, one fsync each, and
// their directories.
func syncFiles(_ string, files []string) error {
	dirs := map[string]bool{}
	for _, p := range files {
		if err := syncPath(p); err != nil {
			return err
		}
		dirs[filepath.Dir(p)] = true
	}
	for d := range dirs {
		if err := syncPath(d); err != nil {
			return err
		}
	}
	return nil
}

func syncPath(p string) error {
	f, err := os.Open(p)
	if err != nil {
		return err
	}
	defer f.Close()
	return f.Sync()
}
