package checkpoint

import (
	"encoding/binary"
	"os"
	"strconv"
	"sync"

	"golang.org/x/sys/unix"
)

// watcher narrows a root's walk to the folders that changed since the last
// one: an inotify watch is put on each folder before it is listed, and a
// folder without an event since (nor a moved inode, nor a changed
// .gitignore above it) is taken from the last snapshot without a syscall.
// Changes inotify does not report are excluded at the source: only local
// file systems are watched (on a network or FUSE mount another machine's
// writes give no event), and a file with more than one link (written
// through a name in an unwatched folder) or a racy one keeps its folder
// listed at every walk. A queue overflow, or a watch that could not be
// added, sends the folders concerned back to the stat walk.
//
// What inotify never reports are stores through a shared writable memory
// mapping of a file (mmap): such a change made between two turns is seen
// only once something else in its folder changes. Every other write,
// truncation, chmod, creation, removal and rename, by any process on this
// kernel, is reported.
type watcher struct {
	fd  int
	mu  sync.Mutex
	wds map[int32][]watchDir
	max int
	buf []byte
}

type watchDir struct {
	rc  *rootCache
	dir string
}

const watchMask = unix.IN_MODIFY | unix.IN_ATTRIB | unix.IN_CLOSE_WRITE | unix.IN_CREATE | unix.IN_DELETE |
	unix.IN_DELETE_SELF | unix.IN_MOVE_SELF | unix.IN_MOVED_FROM | unix.IN_MOVED_TO | unix.IN_ONLYDIR

func newWatcher() *watcher {
	fd, err := unix.InotifyInit1(unix.IN_NONBLOCK | unix.IN_CLOEXEC)
	if err != nil {
		return nil
	}
	// A quarter of the user's watches at most: editors and build tools
	// need theirs.
	limit := 8192
	if b, err := os.ReadFile("/proc/sys/fs/inotify/max_user_watches"); err == nil {
		if n, err := strconv.Atoi(string(trimSpace(b))); err == nil {
			limit = n / 4
		}
	}
	return &watcher{fd: fd, wds: map[int32][]watchDir{}, max: min(limit, 65536), buf: make([]byte, 64<<10)}
}

func trimSpace(b []byte) []byte {
	for len(b) > 0 && (b[len(b)-1] == '\n' || b[len(b)-1] == ' ') {
		b = b[:len(b)-1]
	}
	return b
}

// localFS lists the file systems whose every change goes through this
// kernel.
// Built on first use: a package-level map is built by package
// initialization, on every start of acpd.
var localFS = sync.OnceValue(func() map[int64]bool {
	return map[int64]bool{
		0xEF53:     true, // ext2, ext3, ext4
		0x58465342: true, // xfs
		0x9123683E: true, // btrfs
		0x01021994: true, // tmpfs
		0x794c7630: true, // overlayfs
		0xF2F52010: true, // f2fs
		0x2fc12fc1: true, // zfs
		0xca451a4e: true, // bcachefs
	}
})

// usable reports whether root's changes can be followed.
func (w *watcher) usable(root string) bool {
	if w == nil {
		return false
	}
	var st unix.Statfs_t
	if unix.Statfs(root, &st) != nil {
		return false
	}
	return localFS()[int64(st.Type)]
}

// add watches the open folder f, the folder dir of rc; false when it
// could not be watched (the walk then lists it every time).
func (w *watcher) add(f *os.File, rc *rootCache, dir string) bool {
	w.mu.Lock()
	full := len(w.wds) >= w.max
	w.mu.Unlock()
	if full {
		return false
	}
	// The descriptor's /proc name is the very folder listed next, wherever
	// its path leads by now.
	wd, err := unix.InotifyAddWatch(w.fd, "/proc/self/fd/"+strconv.Itoa(int(f.Fd())), watchMask)
	if err != nil {
		return false
	}
	// A folder in two roots (a root inside another) is one watch, whose
	// events both roots hear.
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, d := range w.wds[int32(wd)] {
		if d.rc == rc && d.dir == dir {
			return true
		}
	}
	if len(w.wds[int32(wd)]) >= 8 {
		return false // a folder moved about: keep no unbounded list
	}
	w.wds[int32(wd)] = append(w.wds[int32(wd)], watchDir{rc, dir})
	return true
}

// drain reads every event queued and marks the folders they name dirty in
// their roots' caches. An error or an overflow marks every root.
func (w *watcher) drain() {
	if w == nil {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	everything := func() {
		for _, ds := range w.wds {
			for _, d := range ds {
				d.rc.mu.Lock()
				d.rc.all = true
				d.rc.mu.Unlock()
			}
		}
	}
	for {
		n, err := unix.Read(w.fd, w.buf)
		if err == unix.EINTR {
			continue
		}
		if err == unix.EAGAIN {
			return
		}
		if err != nil || n <= 0 {
			everything()
			return
		}
		for off := 0; off+unix.SizeofInotifyEvent <= n; {
			wd := int32(binary.NativeEndian.Uint32(w.buf[off:]))
			mask := binary.NativeEndian.Uint32(w.buf[off+4:])
			nameLen := int(binary.NativeEndian.Uint32(w.buf[off+12:]))
			off += unix.SizeofInotifyEvent + nameLen
			if mask&unix.IN_Q_OVERFLOW != 0 {
				everything()
				continue
			}
			for _, d := range w.wds[wd] {
				d.rc.mu.Lock()
				d.rc.dirty[d.dir] = true
				if mask&unix.IN_IGNORED != 0 {
					delete(d.rc.watched, d.dir)
				}
				d.rc.mu.Unlock()
			}
			if mask&unix.IN_IGNORED != 0 {
				delete(w.wds, wd)
			}
		}
	}
}

func (w *watcher) close() { unix.Close(w.fd) }
