package main

import (
	"runtime/debug"
	"sync"
)

// version and commit are stamped at build time (the release build does):
//
//	go build -ldflags "-X main.version=1.2.3 -X main.commit=$(git rev-parse HEAD)" ./cmd/acpd
var version, commit string

// versionString is the stamped version, else the module version recorded by
// `go install module@version`, else "dev". The daemon asks for it twice
// before it answers initialize (the start-up log line, the agent info), and
// debug.ReadBuildInfo parses the whole embedded build description each
// time, so it is worked out once.
var versionString = sync.OnceValue(func() string {
	if version != "" {
		return version
	}
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
		return bi.Main.Version
	}
	return "dev"
})

// commitString is the stamped commit, else the one the go command recorded
// when it built from a git checkout (with "-dirty" for uncommitted changes),
// else "": 12 hex digits are enough to find it.
func commitString() string {
	c, dirty := commit, false
	if c == "" {
		if bi, ok := debug.ReadBuildInfo(); ok {
			for _, s := range bi.Settings {
				switch s.Key {
				case "vcs.revision":
					c = s.Value
				case "vcs.modified":
					dirty = s.Value == "true"
				}
			}
		}
	}
	if len(c) > 12 {
		c = c[:12]
	}
	if c != "" && dirty {
		c += "-dirty"
	}
	return c
}

// versionLine is what acpd --version prints: "acpd 1.2.3 (commit 0123456789ab)".
func versionLine() string {
	s := "acpd " + versionString()
	if c := commitString(); c != "" {
		s += " (commit " + c + ")"
	}
	return s
}
