//go:build linux && !noprefault

package prefault

import (
	"syscall"
	"unsafe"
)

const (
	madvPopulateRead  = 22 // MADV_POPULATE_READ, Linux 5.14
	madvPopulateWrite = 23 // MADV_POPULATE_WRITE

	pageSize = 4096 // the kernel's; Go's heap pages (8 KiB) are whole ones

	// heapBytes is how much heap start-up uses: about 1.7 MiB from the
	// heap's first byte to the last one touched before the initialize
	// answer, with ~60% of its pages touched.
	heapBytes = 2 << 20
)

// heapProbe is a fresh heap object: its address says where the heap is.
var heapProbe *[16]byte

func init() {
	if sandboxHelper() {
		return
	}
	heapProbe = new([16]byte)
	populateHeap(uintptr(unsafe.Pointer(heapProbe)))
	// On the heap mapped just now, not on the stack: a larger frame would
	// have the runtime grow (copy) the goroutine's stack onto new pages.
	buf := make([]byte, 4<<10) // /proc/self/maps at start-up: ~30 lines, 1.7 KB
	if maps := readMaps(buf); maps != nil {
		populateBinary(maps, codeAddr())
	}
}

// sandboxHelper tells whether this process is acpd's sandbox helper
// (argv[1] is HelperSubcommand): one runs per session that runs a confined
// command, or per command, so mapping its heap ahead would cost memory per
// session, and what it runs is not waiting on an editor's initialize.
func sandboxHelper() bool {
	fd, err := syscall.Open("/proc/self/cmdline", syscall.O_RDONLY|syscall.O_CLOEXEC, 0)
	if err != nil {
		return false
	}
	defer syscall.Close(fd)
	var buf [256]byte
	n, err := syscall.Read(fd, buf[:])
	if err != nil || n <= 0 {
		return false
	}
	return helperCmdline(buf[:n])
}

// helperCmdline tells whether a /proc/PID/cmdline (argv[0] NUL argv[1] NUL
// ...) is the sandbox helper's.
func helperCmdline(args []byte) bool {
	i := indexByte(args, 0)
	if i < 0 {
		return false
	}
	args = args[i+1:]
	if j := indexByte(args, 0); j >= 0 {
		args = args[:j]
	}
	return string(args) == HelperSubcommand
}

// readMaps reads /proc/self/maps into buf, nil if it cannot or it does not
// fit (then nothing is mapped).
func readMaps(buf []byte) []byte {
	fd, err := syscall.Open("/proc/self/maps", syscall.O_RDONLY|syscall.O_CLOEXEC, 0)
	if err != nil {
		return nil
	}
	defer syscall.Close(fd)
	n := 0
	for {
		if n == len(buf) {
			return nil
		}
		m, err := syscall.Read(fd, buf[n:])
		if err == syscall.EINTR {
			continue
		}
		if err != nil {
			return nil
		}
		if m == 0 {
			return buf[:n]
		}
		n += m
	}
}

// mapping is one line of /proc/self/maps: its range, permissions and inode.
type mapping struct {
	lo, hi uintptr
	perms  []byte
	inode  []byte
}

// each calls f with every well-formed line of maps, until f returns false.
func each(maps []byte, f func(m mapping) bool) {
	for len(maps) > 0 {
		line := maps
		if i := indexByte(maps, '\n'); i >= 0 {
			line, maps = maps[:i], maps[i+1:]
		} else {
			maps = nil
		}
		// lo-hi perms offset dev inode [path]
		var fields [5][]byte
		n := 0
		for n < len(fields) {
			for len(line) > 0 && line[0] == ' ' {
				line = line[1:]
			}
			i := indexByte(line, ' ')
			if i < 0 {
				i = len(line)
			}
			if i == 0 {
				break
			}
			fields[n], line = line[:i], line[i:]
			n++
		}
		if n < len(fields) || len(fields[1]) != 4 {
			continue
		}
		dash := indexByte(fields[0], '-')
		if dash < 0 {
			continue
		}
		lo, ok1 := parseHex(fields[0][:dash])
		hi, ok2 := parseHex(fields[0][dash+1:])
		if !ok1 || !ok2 || hi <= lo {
			continue
		}
		if !f(mapping{lo: lo, hi: hi, perms: fields[1], inode: fields[4]}) {
			return
		}
	}
}

// populateHeap maps the first heapBytes of the heap, whose object probe
// is. The runtime maps its heap in 4 MiB chunks, starts it at a random page
// of the first one and grows it upward; the pages below that start are
// never used. So the start is the lowest page of the probe's chunk that is
// already resident: the runtime's own start has allocated there. Mapping
// stops where the runtime's mapping does (the populate fails there): the
// runtime maps the next chunk when it needs it, replacing whatever was
// mapped there before.
func populateHeap(probe uintptr) {
	const chunk = 4 << 20
	base := probe &^ (chunk - 1)
	to := (probe + pageSize) &^ (pageSize - 1)
	var vec [chunk / pageSize]byte
	if _, _, e := syscall.Syscall(syscall.SYS_MINCORE, base, to-base, uintptr(unsafe.Pointer(&vec[0]))); e != 0 {
		return
	}
	start := to - pageSize
	for i := range (to - base) / pageSize {
		if vec[i]&1 != 0 {
			start = base + i*pageSize
			break
		}
	}
	madvise(start, heapBytes, madvPopulateWrite)
}

// populateBinary maps the executable's read-only mappings, code and data:
// those of the same file as the code at pc.
func populateBinary(maps []byte, pc uintptr) {
	var inode []byte
	each(maps, func(m mapping) bool {
		if m.lo <= pc && pc < m.hi {
			inode = m.inode
			return false
		}
		return true
	})
	if string(inode) == "0" || inode == nil {
		return
	}
	each(maps, func(m mapping) bool {
		if m.perms[0] == 'r' && m.perms[1] == '-' && string(m.inode) == string(inode) {
			madvise(m.lo, m.hi-m.lo, madvPopulateRead)
		}
		return true
	})
}

// madvise ignores errors: an old kernel (EINVAL) or a range the runtime
// changed meanwhile costs only the faults this would have saved.
func madvise(addr, n, advice uintptr) {
	syscall.Syscall(syscall.SYS_MADVISE, addr, n, advice)
}

// codeAddr is an address in the executable's code: this package's marker.
func codeAddr() uintptr {
	f := marker
	return **(**uintptr)(unsafe.Pointer(&f))
}

//go:noinline
func marker() {}

func indexByte(b []byte, c byte) int {
	for i, x := range b {
		if x == c {
			return i
		}
	}
	return -1
}

func parseHex(b []byte) (uintptr, bool) {
	if len(b) == 0 || len(b) > 16 {
		return 0, false
	}
	var v uintptr
	for _, c := range b {
		switch {
		case '0' <= c && c <= '9':
			v = v<<4 | uintptr(c-'0')
		case 'a' <= c && c <= 'f':
			v = v<<4 | uintptr(c-'a'+10)
		default:
			return 0, false
		}
	}
	return v, true
}
