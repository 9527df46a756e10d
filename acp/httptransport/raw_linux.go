package httptransport

import (
	"errors"
	"net"
	"os"
	"sync"
	"syscall"
	"time"

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
//
// A TLS stream's socket is watched the same way, but what it reads is
// records, and only crypto/tls can tell a close (close_notify, or the end
// of the connection) from a record that is no data at all (a TLS 1.3
// KeyUpdate, an empty record) or from half a record: readTLS reads them
// through the TLS connection, bounded by a deadline, and the stream is
// registered again unless its client is gone. That read runs in a
// goroutine of its own, alive only for the read: it may wait on the TLS
// connection's write lock (a KeyUpdate asking for ours is answered at
// once, as are errors with an alert), which a writer holds for as long as
// a stalled client makes it wait, and the watcher must not.
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
// portable watcher where the connection has no descriptor to watch or the
// epoll instance could not be made.
//
// Over TLS, what crypto/tls read from the socket before the hand-over
// (net/http's read of the request and its background read, into the
// hijacked reader or the TLS connection's own buffers) is read through
// first: a close_notify already there would never make the socket
// readable again. The deadline is already past, so only what is buffered
// is read and the socket is left alone; anything that comes after is
// seen by the watcher, which is level-triggered.
func (k *h1Sink) watchClose() {
	if k.tc != nil && !k.readTLS(time.Unix(1, 0)) {
		k.close()
		return
	}
	if !watcher.add(k) {
		go k.watchRead()
	}
}

// sock is the connection whose descriptor is watched: under TLS, the
// connection the TLS records travel on.
func (k *h1Sink) sock() net.Conn {
	if k.tc != nil {
		return k.tc.NetConn()
	}
	return k.nc
}

// tlsDropLimit bounds the application data a TLS stream's client may send
// over the stream's life (it has no reason to send any) before the stream
// is closed. Unlike the bytes of a cleartext stream, which the watcher
// drops a bounded number at a time and then waits on the socket again,
// records must be read until crypto/tls holds none: one left in its
// buffers (a close_notify behind the data) would never wake the watcher.
const tlsDropLimit = 64 << 10

// tlsReadWait bounds the read of a TLS stream the watcher found readable,
// once what was there is read: the rest of half a record may be on its
// way. A record still incomplete then waits for the socket's next event.
const tlsReadWait = 50 * time.Millisecond

// readTLS reads what the client of a TLS stream sent until deadline and
// reports whether its end is still open: false on the end of the
// connection, a close_notify or any other alert, a record crypto/tls
// rejects, or more data than tlsDropLimit. Only a reader of its own runs
// it: the watcher's, or the hand-over's before the watcher has the stream.
func (k *h1Sink) readTLS(deadline time.Time) bool {
	// A TLS 1.3 KeyUpdate that asks for ours is answered by the read, under
	// the connection's write deadline, which a writer set for its own
	// write, maybe long ago: a failed answer would fail every write after.
	// A running writer sets its own (and the answer waits for its write).
	if !k.rs.running.Load() {
		_ = k.tc.SetWriteDeadline(time.Now().Add(k.timeout))
	}
	_ = k.tc.SetReadDeadline(deadline)
	var buf [512]byte
	for {
		n, err := k.tc.Read(buf[:])
		k.dropped += n
		if k.dropped > tlsDropLimit {
			return false
		}
		if err != nil {
			// A timeout leaves the connection usable: crypto/tls keeps
			// half a record for the next read.
			return errors.Is(err, os.ErrDeadlineExceeded)
		}
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
	sc, ok := k.sock().(syscall.Conn)
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
			switch {
			case k == nil:
			case k.tc != nil:
				go w.checkTLS(k)
			case !w.alive(k, buf[:]):
				// Closing a cleartext connection does not wait (a TLS one
				// writes its close_notify first).
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

// checkTLS reads what the client of the TLS stream k sent and registers k
// again for its next event, or closes it.
func (w *closeWatcher) checkTLS(k *h1Sink) {
	if !k.readTLS(time.Now().Add(tlsReadWait)) || !w.rearm(k) {
		k.close()
	}
}

// rearm registers k again for its next event; false if it cannot be (its
// connection is closed). With the watcher failed, the portable watcher
// has k and there is nothing to do.
func (w *closeWatcher) rearm(k *h1Sink) bool {
	rc, err := k.sock().(syscall.Conn).SyscallConn()
	if err != nil {
		return false
	}
	// Under the lock: fail closes the epoll file, and its number could be
	// another file's by the time of the call.
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.failed {
		return true
	}
	ok := false
	// Control holds the descriptor open: once the connection is closed it
	// fails, and the number, which may be another stream's by now, is not
	// touched.
	if err := rc.Control(func(fd uintptr) {
		ev := unix.EpollEvent{Events: watchEvents, Fd: int32(uint32(k.watch)), Pad: int32(uint32(k.watch >> 32))}
		ok = unix.EpollCtl(w.epfd, unix.EPOLL_CTL_MOD, int(fd), &ev) == nil
	}); err != nil {
		return false
	}
	return ok
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
	}); err != nil {
		return false
	}
	return open && w.rearm(k)
}
