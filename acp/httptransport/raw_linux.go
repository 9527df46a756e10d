package httptransport

import (
	"errors"
	"os"
	"sync"
	"syscall"

	"golang.org/x/sys/unix"
)

// closeWatcher sees the clients of all hijacked streams close their end
// through one epoll instance of its own, where a goroutine parked in a
// read per stream cost every idle stream a goroutine and its stack. The
// instance is itself in the Go runtime's poller (an epoll file is
// readable while it has events), so the one goroutine that serves it is
// parked like any other network read, holding no thread.
//
// A stream is registered one-shot and keyed by a number of its own, never
// by its file descriptor: a stream the writer ended is closed without
// telling the watcher, its descriptor may be reused at once, and an event
// fetched before the close must not be taken for the new stream's. The
// one-shot registration also means a descriptor kept open a moment longer
// by a forked child reports at most one event nobody claims.
type closeWatcher struct {
	once sync.Once
	ep   syscall.RawConn // the epoll file; nil if it could not be made
	epfd int

	mu      sync.Mutex
	streams map[uint64]*h1Sink
	next    uint64
	failed  bool
}

var watcher closeWatcher

const watchEvents = unix.EPOLLIN | unix.EPOLLRDHUP | unix.EPOLLONESHOT

// watchClose registers k's connection with the watcher, or starts the
// portable watcher where the connection has no descriptor to watch (TLS)
// or the epoll instance could not be made.
func (k *h1Sink) watchClose() {
	if !watcher.add(k) {
		go k.watchRead()
	}
}

func unwatchClose(k *h1Sink) {
	watcher.mu.Lock()
	defer watcher.mu.Unlock()
	if k.watch != 0 {
		delete(watcher.streams, k.watch)
	}
}

func (w *closeWatcher) start() {
	fd, err := unix.EpollCreate1(unix.EPOLL_CLOEXEC)
	if err != nil {
		return
	}
	if unix.SetNonblock(fd, true) != nil {
		_ = unix.Close(fd)
		return
	}
	// A non-blocking descriptor: os registers it with the runtime poller.
	f := os.NewFile(uintptr(fd), "acpd-stream-watcher")
	rc, err := f.SyscallConn()
	if err != nil {
		_ = f.Close()
		return
	}
	w.ep, w.epfd = rc, fd
	w.streams = map[uint64]*h1Sink{}
	go w.loop(f)
}

func (w *closeWatcher) add(k *h1Sink) bool {
	sc, ok := k.nc.(syscall.Conn)
	if !ok {
		return false
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return false
	}
	w.once.Do(w.start)
	if w.ep == nil {
		return false
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.failed {
		return false
	}
	w.next++
	key := w.next
	ev := unix.EpollEvent{Events: watchEvents, Fd: int32(uint32(key)), Pad: int32(uint32(key >> 32))}
	var ctlErr error
	if err := rc.Control(func(fd uintptr) {
		ctlErr = unix.EpollCtl(w.epfd, unix.EPOLL_CTL_ADD, int(fd), &ev)
	}); err != nil || ctlErr != nil {
		return false
	}
	k.watch = key
	w.streams[key] = k
	return true
}

// loop takes the watcher's events for as long as the process lives.
func (w *closeWatcher) loop(f *os.File) {
	var events [64]unix.EpollEvent
	var buf [512]byte
	for {
		n := 0
		var werr error
		err := w.ep.Read(func(fd uintptr) bool {
			n, werr = unix.EpollWait(int(fd), events[:], 0)
			// Nothing ready: wait until the poller sees the instance
			// readable again.
			return n > 0 || werr != nil
		})
		if errors.Is(werr, unix.EINTR) {
			continue
		}
		if err != nil || werr != nil {
			w.fail(f)
			return
		}
		for _, ev := range events[:n] {
			key := uint64(uint32(ev.Fd)) | uint64(uint32(ev.Pad))<<32
			w.mu.Lock()
			k := w.streams[key]
			w.mu.Unlock()
			if k != nil && !w.alive(k, buf[:]) {
				k.close()
			}
		}
	}
}

// fail hands every stream to the portable watcher, and every stream from
// now on, should the epoll instance ever fail; it is not known to.
func (w *closeWatcher) fail(f *os.File) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.failed = true
	for key, k := range w.streams {
		delete(w.streams, key)
		go k.watchRead()
	}
	_ = f.Close()
}

// alive drops what the client of k sent and reports whether its end is
// still open; if it is, k is registered again for its next event.
func (w *closeWatcher) alive(k *h1Sink, buf []byte) bool {
	rc, err := k.nc.(syscall.Conn).SyscallConn()
	if err != nil {
		return false
	}
	open := true
	if err := rc.Control(func(fd uintptr) {
		// A bounded drain: a client that keeps sending is looked at again
		// at its next event, after the others.
	drain:
		for range 16 {
			n, err := unix.Read(int(fd), buf)
			switch {
			case err == nil && n > 0, errors.Is(err, unix.EINTR):
			case errors.Is(err, unix.EAGAIN):
				break drain
			default: // end of stream: the client closed its end; or reset
				open = false
				break drain
			}
		}
		ev := unix.EpollEvent{Events: watchEvents, Fd: int32(uint32(k.watch)), Pad: int32(uint32(k.watch >> 32))}
		if open && unix.EpollCtl(w.epfd, unix.EPOLL_CTL_MOD, int(fd), &ev) != nil {
			open = false
		}
	}); err != nil {
		return false
	}
	return open
}
