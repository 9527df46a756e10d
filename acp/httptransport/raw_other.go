//go:build !linux

package httptransport

// watchClose starts the stream's close watcher: a goroutine of its own.
func (k *h1Sink) watchClose() { go k.watchRead() }

func unwatchClose(*h1Sink) {}
