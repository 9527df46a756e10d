package sandbox

import (
	"bytes"
	"os"
	"slices"
	"strconv"
	"strings"
)

// startEnviron is the environment the process started with, which the
// kernel shows in /proc/PID/environ (os.Setenv and os.Unsetenv change only
// Go's copy of it). Taken when the package initialises, before main runs.
var startEnviron = os.Environ()

// ScrubEnviron blanks, in this process's own initial environment, the
// values of the variables e drops, so that /proc/PID/environ — which the
// kernel reads from that memory whenever it is opened — no longer shows
// them. Landlock keeps a confined command from tracing acpd and from
// reading its memory, but on the kernels measured (6.18) not from reading a
// same-user process's environ file; the token of `acpd serve` in
// $ACPD_SERVER_TOKEN and the provider's key were there for any command to
// take. Making acpd not dumpable would hide that file too, but a process
// that is not dumpable cannot write the user namespace maps of the
// children it starts, which the private /dev/shm needs.
//
// Go copied the environment into its own memory at start, so os.Environ,
// os.Getenv and the programs acpd starts are unaffected; only the bytes
// the kernel shows change: each blanked value becomes NUL bytes. Errors are
// ignored: there is nothing better to do than leave the file as it was.
func ScrubEnviron(e EnvPolicy) {
	// Most environments hold nothing to blank, and finding the bytes
	// (/proc/self/stat, then /proc/self/mem) costs more than the rest of
	// acpd's own work before main: look at the names first.
	if !slices.ContainsFunc(startEnviron, func(kv string) bool {
		name, value, _ := strings.Cut(kv, "=")
		return name != "" && value != "" && e.Drops(name)
	}) {
		return
	}
	start, end, ok := environBounds()
	if !ok {
		return
	}
	mem, err := os.OpenFile("/proc/self/mem", os.O_RDWR, 0)
	if err != nil {
		return
	}
	defer mem.Close()
	buf := make([]byte, end-start)
	if _, err := mem.ReadAt(buf, int64(start)); err != nil {
		return
	}
	changed := false
	for off := 0; off < len(buf); {
		n := bytes.IndexByte(buf[off:], 0)
		if n < 0 {
			n = len(buf) - off
		}
		entry := buf[off : off+n]
		if eq := bytes.IndexByte(entry, '='); eq > 0 && eq+1 < len(entry) && e.Drops(string(entry[:eq])) {
			clear(entry[eq+1:])
			changed = true
		}
		off += n + 1
	}
	if changed {
		_, _ = mem.WriteAt(buf, int64(start))
	}
}

// environBounds reads where the initial environment lies in this process's
// memory: fields 50 and 51 of /proc/self/stat (env_start, env_end).
func environBounds() (start, end uint64, ok bool) {
	b, err := os.ReadFile("/proc/self/stat")
	if err != nil {
		return 0, 0, false
	}
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, 0, false
	}
	// After "pid (comm)" the fields start at field 3.
	f := strings.Fields(string(b[i+1:]))
	const envStart, envEnd = 50 - 3, 51 - 3
	if len(f) <= envEnd {
		return 0, 0, false
	}
	start, err1 := strconv.ParseUint(f[envStart], 10, 64)
	end, err2 := strconv.ParseUint(f[envEnd], 10, 64)
	if err1 != nil || err2 != nil || end <= start || end-start > 1<<24 {
		return 0, 0, false
	}
	return start, end, true
}
