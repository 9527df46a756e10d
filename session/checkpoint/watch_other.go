//go:build !linux

package checkpoint

import "os"

// watcher: without inotify every walk lstats every entry.
type watcher struct{}

func newWatcher() *watcher                               { return nil }
func (w *watcher) usable(string) bool                    { return false }
func (w *watcher) add(*os.File, *rootCache, string) bool { return false }
func (w *watcher) drain()                                {}

func (w *watcher) close() {}
