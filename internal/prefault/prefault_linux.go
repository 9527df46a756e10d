//go:build linux && (amd64 || arm64) && !noprefault

package prefault

// This package imports nothing (unsafe is no package to initialise): the
// linker orders package inits by import path among those whose imports are
// done, so an init with no imports runs among the very first, before the
// dozen standard-library inits that importing syscall put ahead of it. The
// system calls are made by rawSyscall, in assembly.

import "unsafe"

const (
	madvHugepage      = 14 // MADV_HUGEPAGE
	madvPopulateRead  = 22 // MADV_POPULATE_READ, Linux 5.14
	madvPopulateWrite = 23 // MADV_POPULATE_WRITE
	madvCollapse      = 25 // MADV_COLLAPSE, Linux 6.1

	oRdonly  = 0x0
	oCloexec = 0x80000
	eintr    = 4

	pageSize = 4096    // the kernel's; Go's heap pages (8 KiB) are whole ones
	hugePage = 2 << 20 // a transparent huge page (x86-64, and arm64 with 4 KiB pages)

	// heapBytes is how much heap start-up uses: about 1.7 MiB from the
	// heap's first byte to the last one touched before the initialize
	// answer, with ~60% of its pages touched.
	heapBytes = 2 << 20
)

// rawSyscall makes system call trap with three arguments; errno is 0 on
// success.
//
//go:noescape
func rawSyscall(trap, a1, a2, a3 uintptr) (r1, errno uintptr)

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
	fd, ok := open(&procCmdline[0])
	if !ok {
		return false
	}
	defer closeFd(fd)
	var buf [256]byte
	n, e := rawSyscall(sysRead, fd, uintptr(unsafe.Pointer(&buf[0])), uintptr(len(buf)))
	if e != 0 || n == 0 {
		return false
	}
	return helperCmdline(buf[:n])
}

// NUL-terminated paths for open.
var (
	procCmdline = [...]byte{'/', 'p', 'r', 'o', 'c', '/', 's', 'e', 'l', 'f', '/', 'c', 'm', 'd', 'l', 'i', 'n', 'e', 0}
	procMaps    = [...]byte{'/', 'p', 'r', 'o', 'c', '/', 's', 'e', 'l', 'f', '/', 'm', 'a', 'p', 's', 0}
)

// open opens the NUL-terminated path at name for reading.
func open(name *byte) (uintptr, bool) {
	atFdcwd := -100 // the path is absolute: this is not used
	fd, e := rawSyscall(sysOpenat, uintptr(atFdcwd), uintptr(unsafe.Pointer(name)), oRdonly|oCloexec)
	return fd, e == 0
}

func closeFd(fd uintptr) { rawSyscall(sysClose, fd, 0, 0) }

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
	fd, ok := open(&procMaps[0])
	if !ok {
		return nil
	}
	defer closeFd(fd)
	n := 0
	for {
		if n == len(buf) {
			return nil
		}
		m, e := rawSyscall(sysRead, fd, uintptr(unsafe.Pointer(&buf[n])), uintptr(len(buf)-n))
		if e == eintr {
			continue
		}
		if e != 0 {
			return nil
		}
		if m == 0 {
			return buf[:n]
		}
		n += int(m)
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
// already resident: the runtime's own start has allocated there.
//
// Each 2 MiB-aligned stretch of that range is allowed a transparent huge
// page (MADV_HUGEPAGE): populating an untouched one then faults in one huge
// page, and where the runtime has touched pages already MADV_COLLAPSE
// (Linux 6.1) copies them into one. Where the kernel gives none (huge pages
// off, none free, an older kernel) the populate maps small pages. The huge
// page is worth its waste (the stretch's pages below the heap's start, up
// to 2 MiB more resident): under a hypervisor that shadows the guest's page
// tables (PVM, as on the VMs this was measured on) populating small pages
// only fills the guest's page tables, and each page's first touch still
// traps to the host, about 8 µs; 2 MiB of small pages populated then
// touched took 4-5 ms there, one huge page 0.2-0.3 ms.
//
// Mapping stops where the runtime's mapping does (the populate fails
// there): the runtime maps the next chunk when it needs it, replacing
// whatever was mapped there before.
func populateHeap(probe uintptr) {
	const chunk = 4 << 20
	base := probe &^ (chunk - 1)
	to := (probe + pageSize) &^ (pageSize - 1)
	var vec [chunk / pageSize]byte
	if _, e := rawSyscall(sysMincore, base, to-base, uintptr(unsafe.Pointer(&vec[0]))); e != 0 {
		return
	}
	start := to - pageSize
	for i := range (to - base) / pageSize {
		if vec[i]&1 != 0 {
			start = base + i*pageSize
			break
		}
	}
	end := start + heapBytes
	for r := start &^ (hugePage - 1); r < end; r += hugePage {
		madvise(r, hugePage, madvHugepage)
		if r < to {
			madvise(r, hugePage, madvCollapse)
		}
		if madvise(max(r, start), min(r+hugePage, end)-max(r, start), madvPopulateWrite) != 0 {
			return
		}
	}
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

// madvise returns the errno, which callers mostly ignore: an old kernel
// (EINVAL) or a range the runtime changed meanwhile costs only the faults
// this would have saved.
func madvise(addr, n, advice uintptr) uintptr {
	_, e := rawSyscall(sysMadvise, addr, n, advice)
	return e
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
