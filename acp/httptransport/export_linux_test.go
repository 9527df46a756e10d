package httptransport

// WatchedStreams is the number of streams the close watcher holds.
func WatchedStreams() int {
	watcher.mu.Lock()
	defer watcher.mu.Unlock()
	return len(watcher.streams)
}
