//go:build linux && (amd64 || arm64) && !noprefault

package prefault

import (
	"bufio"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"unsafe"
)

func TestEach(t *testing.T) {
	maps := []byte(`00400000-00ac8000 r-xp 00000000 fd:01 1234   /usr/bin/acpd
00ac8000-0118c000 r--p 006c8000 fd:01 1234   /usr/bin/acpd
bogus line
0118c000-0128c000 rw-p 00d8c000 fd:01 1234   /path with spaces/acpd
c000000000-c000400000 rw-p 00000000 00:00 0 
zz-10 r--p 00000000 00:00 0
7ffd1000-7ffd0000 r--p 00000000 00:00 0
7ffd2000-7ffd3000 r-x 00000000 00:00 0
7ffd4000-7ffd5000 r-xp 00000000 00:00 0                          [vdso]`)
	var got []string
	each(maps, func(m mapping) bool {
		got = append(got, strconv.FormatUint(uint64(m.lo), 16)+"-"+strconv.FormatUint(uint64(m.hi), 16)+" "+string(m.perms)+" "+string(m.inode))
		return true
	})
	want := []string{"400000-ac8000 r-xp 1234", "ac8000-118c000 r--p 1234", "118c000-128c000 rw-p 1234",
		"c000000000-c000400000 rw-p 0", "7ffd4000-7ffd5000 r-xp 0"}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("each gave\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	n := 0
	each(maps, func(mapping) bool { n++; return false })
	if n != 1 {
		t.Errorf("each went on after false: %d calls", n)
	}
}

func TestHelperCmdline(t *testing.T) {
	for _, tt := range []struct {
		cmdline string
		helper  bool
	}{
		{"/usr/bin/acpd\x00__sandbox-exec\x00--serve\x003\x00", true},
		{"acpd\x00__sandbox-exec\x00", true},
		{"acpd\x00__sandbox-exec", true}, // cut at the read's end
		{"acpd\x00", false},
		{"acpd", false},
		{"acpd\x00serve\x00__sandbox-exec\x00", false},
		{"acpd\x00__sandbox-exec-x\x00", false},
		{"__sandbox-exec\x00", false},
		{"", false},
	} {
		if got := helperCmdline([]byte(tt.cmdline)); got != tt.helper {
			t.Errorf("helperCmdline(%q) = %v, want %v", tt.cmdline, got, tt.helper)
		}
	}
	if sandboxHelper() {
		t.Error("the test binary is taken for the sandbox helper")
	}
}

// smaps is the fields of /proc/self/smaps, in KiB, for the mapping that
// holds addr ("Size", "Rss", "AnonHugePages", ...).
func smaps(t *testing.T, addr uintptr) map[string]int {
	t.Helper()
	f, err := os.Open("/proc/self/smaps")
	if err != nil {
		t.Skip(err)
	}
	defer f.Close()
	var fields map[string]int
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		if r, _, ok := strings.Cut(line, " "); ok && strings.Contains(r, "-") && !strings.HasSuffix(r, ":") {
			if fields != nil {
				return fields
			}
			lo, hi, _ := strings.Cut(r, "-")
			l, err1 := strconv.ParseUint(lo, 16, 64)
			h, err2 := strconv.ParseUint(hi, 16, 64)
			if err1 == nil && err2 == nil && uint64(addr) >= l && uint64(addr) < h {
				fields = map[string]int{}
			}
			continue
		}
		if fields == nil {
			continue
		}
		k, v, _ := strings.Cut(line, ":")
		if kb, err := strconv.Atoi(strings.TrimSuffix(strings.TrimSpace(v), " kB")); err == nil {
			fields[k] = kb
		}
	}
	if fields == nil {
		t.Fatalf("no mapping holds %#x", addr)
	}
	return fields
}

// rss is the resident size in KiB of the mapping that holds addr, and the
// mapping's size.
func rss(t *testing.T, addr uintptr) (rssKB, sizeKB int) {
	t.Helper()
	f := smaps(t, addr)
	return f["Rss"], f["Size"]
}

func TestPopulateBinary(t *testing.T) {
	buf := make([]byte, 64<<10)
	maps := readMaps(buf)
	if maps == nil {
		t.Fatal("cannot read /proc/self/maps")
	}
	// Drop the code's pages from this process's page tables, then map them
	// back the way init does.
	pc := codeAddr()
	var code mapping
	each(maps, func(m mapping) bool {
		if m.lo <= pc && pc < m.hi {
			code = m
			return false
		}
		return true
	})
	if code.hi == 0 {
		t.Fatal("no mapping holds the code")
	}
	const madvDontNeed = 4
	madvise(code.lo, code.hi-code.lo, madvDontNeed)
	if r, size := rss(t, pc); r == size {
		t.Skipf("the code mapping is resident after MADV_DONTNEED (%d KiB)", r)
	}
	populateBinary(maps, pc)
	if r, size := rss(t, pc); r != size {
		t.Errorf("code mapping: %d of %d KiB resident after populateBinary", r, size)
	}
}

func TestPopulateHeap(t *testing.T) {
	// The heap's start 3 MiB into its chunk leaves 1 MiB before the
	// runtime's reservation, in one huge-page stretch; 1 MiB in, the 2 MiB
	// from the start span both stretches of the chunk, the second one
	// untouched.
	for _, off := range []uintptr{3 << 20, 1 << 20} {
		t.Run(strconv.Itoa(int(off>>10))+"KiB", func(t *testing.T) { testPopulateHeap(t, off) })
	}
}

func testPopulateHeap(t *testing.T, off uintptr) {
	// Fresh memory of the process's own, as the runtime maps its heap: a
	// 4 MiB chunk and, after it, address space reserved but not mapped
	// yet. The runtime's start has used a few pages from a random start.
	const chunk = 4 << 20
	mem, err := syscall.Mmap(-1, 0, 3*chunk, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_PRIVATE|syscall.MAP_ANON)
	if err != nil {
		t.Skip(err)
	}
	defer syscall.Munmap(mem)
	base := (uintptr(unsafe.Pointer(&mem[0])) + chunk - 1) &^ (chunk - 1)
	at := func(p uintptr) int { return int(p - uintptr(unsafe.Pointer(&mem[0]))) }
	if err := syscall.Mprotect(mem[at(base+chunk):at(base+2*chunk)], syscall.PROT_NONE); err != nil {
		t.Fatal(err)
	}
	start := base + off
	for _, p := range []uintptr{start, start + 3*pageSize, start + 9*pageSize} {
		mem[at(p)] = 1
	}
	populateHeap(start + 9*pageSize + 100)
	var vec [2 * chunk / pageSize]byte
	if _, _, e := syscall.Syscall(syscall.SYS_MINCORE, base, chunk, uintptr(unsafe.Pointer(&vec[0]))); e != 0 {
		t.Fatal(e)
	}
	if _, _, e := syscall.Syscall(syscall.SYS_MINCORE, base+chunk, chunk/2, uintptr(unsafe.Pointer(&vec[chunk/pageSize]))); e != 0 {
		t.Fatal(e)
	}
	// A stretch given a huge page is resident whole, else only from the
	// start on; nothing is mapped past start+heapBytes or the chunk.
	huge := map[uintptr]bool{}
	for r := start &^ (hugePage - 1); r < base+chunk; r += hugePage {
		huge[r] = smaps(t, r)["AnonHugePages"] >= hugePage>>10
	}
	end := min(start+heapBytes, base+chunk)
	for i := range uintptr(chunk / pageSize * 3 / 2) {
		p := base + i*pageSize
		resident := vec[i]&1 != 0
		want := p >= start && p < end || huge[p&^(hugePage-1)]
		if resident != want {
			t.Fatalf("page %d KiB into the chunk (heap from %d KiB, huge pages %v): resident %v, want %v", (p-base)>>10, off>>10, huge, resident, want)
		}
	}
	t.Logf("huge pages by stretch: %v", huge)
}
