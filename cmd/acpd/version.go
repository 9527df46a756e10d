package main

import "runtime/debug"

// version is stamped at build time:
//
//	go build -ldflags "-X main.version=v1.2.3" ./cmd/acpd
var version string

// versionString is the stamped version, else the module version recorded by
// `go install module@version`, else "dev".
func versionString() string {
	if version != "" {
		return version
	}
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
		return bi.Main.Version
	}
	return "dev"
}
