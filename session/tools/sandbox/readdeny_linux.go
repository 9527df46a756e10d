package sandbox

import (
	"bufio"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// mount is one line of /proc/self/mountinfo: which folder of which
// filesystem (dev, root) is seen where (point).
type mount struct {
	dev, root, point string
}

// readMounts reads this process's mount table; nil when it cannot.
func readMounts() []mount {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return nil
	}
	defer f.Close()
	var out []mount
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		// ID PARENT MAJOR:MINOR ROOT POINT OPTIONS … - TYPE SOURCE …
		f := strings.Fields(sc.Text())
		if len(f) < 5 {
			continue
		}
		out = append(out, mount{dev: f[2], root: unescapeMount(f[3]), point: unescapeMount(f[4])})
	}
	return out
}

// unescapeMount undoes mountinfo's octal escapes (\040 for a space).
func unescapeMount(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			if n, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(n))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// under reports whether p is base or inside it.
func under(p, base string) bool {
	return p == base || base == "/" || strings.HasPrefix(p, base+"/")
}

// mountAliases returns the other paths at which the file or folder at path
// (a real path) is seen through the mount table: a bind mount of a folder
// above it (the home folder mounted again under /mnt, a dev container's
// volume) makes it readable there too, since Landlock walks the path a file
// was opened by. Each is denied like path.
func mountAliases(mounts []mount) func(string) []string {
	return func(path string) []string {
		// The mount path lies in: the last one listed whose point holds it
		// (later mounts hide earlier ones at the same point).
		home := -1
		for i, m := range mounts {
			if under(path, m.point) && (home < 0 || len(m.point) >= len(mounts[home].point)) {
				home = i
			}
		}
		if home < 0 {
			return nil
		}
		h := mounts[home]
		rel := strings.TrimPrefix(strings.TrimPrefix(path, h.point), "/")
		inFS := filepath.Join(h.root, rel) // path within its filesystem
		var out []string
		for i, m := range mounts {
			if i == home || m.dev != h.dev || !under(inFS, m.root) {
				continue
			}
			alias := filepath.Join(m.point, strings.TrimPrefix(strings.TrimPrefix(inFS, m.root), "/"))
			if alias != path {
				out = append(out, alias)
			}
		}
		return out
	}
}

// deniedAliases is mountAliases over this process's mount table.
func deniedAliases() func(string) []string { return mountAliases(readMounts()) }
