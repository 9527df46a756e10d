// Command release writes acpd's entry for the ACP agent registry from a
// release build's output: after `goreleaser release` (or `--snapshot`) has
// put the archives, checksums.txt and metadata.json in dist/,
//
//	go run ./release -dist dist
//
// writes dist/registry/acpd/agent.json, naming each platform's archive by
// its download URL, and copies icon.svg beside it — the folder the registry
// takes as it is. The archives' checksums are checked against checksums.txt
// on the way, so an entry never names an archive that was not built.
package main

import (
	"bufio"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
)

// Platform is one registry target and the Go platform built for it.
type Platform struct {
	Registry   string // the registry's name: linux-x86_64
	GOOS, Arch string // GoReleaser's: linux, amd64
}

// Platforms are the six the registry knows, each built by the release.
var Platforms = []Platform{
	{"darwin-aarch64", "darwin", "arm64"},
	{"darwin-x86_64", "darwin", "amd64"},
	{"linux-aarch64", "linux", "arm64"},
	{"linux-x86_64", "linux", "amd64"},
	{"windows-aarch64", "windows", "arm64"},
	{"windows-x86_64", "windows", "amd64"},
}

// ArchiveName is the archive .goreleaser.yaml names for version and p.
func ArchiveName(version string, p Platform) string {
	ext := ".tar.gz"
	if p.GOOS == "windows" {
		ext = ".zip"
	}
	return fmt.Sprintf("acpd_%s_%s_%s%s", version, p.GOOS, p.Arch, ext)
}

// Binary is the executable's name inside p's archive.
func Binary(p Platform) string {
	if p.GOOS == "windows" {
		return "acpd.exe"
	}
	return "acpd"
}

// Agent is a registry entry: the fields of agent.schema.json acpd uses.
type Agent struct {
	ID           string       `json:"id"`
	Name         string       `json:"name"`
	Version      string       `json:"version"`
	Description  string       `json:"description"`
	Repository   string       `json:"repository"`
	Authors      []string     `json:"authors"`
	License      string       `json:"license"`
	Icon         string       `json:"icon"`
	Distribution Distribution `json:"distribution"`
}

// Distribution is how a client gets acpd: one archive per platform.
type Distribution struct {
	Binary map[string]Target `json:"binary"`
}

// Target is one platform's archive and the command in it. acpd serves ACP
// on stdio when started without arguments, so there are none.
type Target struct {
	Archive string `json:"archive"`
	Cmd     string `json:"cmd"`
}

// Repository is where acpd's source and releases live.
const Repository = "https://github.com/acpd/acpd"

// Entry is acpd's registry entry for version, its archives downloaded
// from baseURL/v{version}/.
func Entry(version, baseURL string) Agent {
	a := Agent{
		ID:          "acpd",
		Name:        "acpd",
		Version:     version,
		Description: "A small, fast ACP agent for any OpenAI-compatible model, with loop protection that stops runaway turns, durable sessions and a shell sandbox",
		Repository:  Repository,
		Authors:     []string{"The acpd authors"},
		License:     "Apache-2.0",
		Icon:        "./icon.svg",
		Distribution: Distribution{
			Binary: map[string]Target{},
		},
	}
	base := strings.TrimRight(baseURL, "/") + "/v" + version + "/"
	for _, p := range Platforms {
		a.Distribution.Binary[p.Registry] = Target{Archive: base + ArchiveName(version, p), Cmd: "./" + Binary(p)}
	}
	return a
}

// ReadChecksums parses checksums.txt: "HEX  NAME" per line.
func ReadChecksums(path string) (map[string]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	sums := map[string]string{}
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		sum, name, ok := strings.Cut(strings.TrimSpace(sc.Text()), "  ")
		if !ok || len(sum) != sha256.Size*2 {
			return nil, fmt.Errorf("%s:%d: want \"SHA256  NAME\", got %q", path, n, sc.Text())
		}
		sums[strings.TrimSpace(name)] = sum
	}
	return sums, sc.Err()
}

// FileSHA256 is the hex SHA-256 of the file at path.
func FileSHA256(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// CheckArchives reports every platform's archive that is missing from dist
// or whose SHA-256 is not the one checksums.txt lists.
func CheckArchives(dist, version string) error {
	sums, err := ReadChecksums(filepath.Join(dist, "checksums.txt"))
	if err != nil {
		return err
	}
	var errs []error
	for _, p := range Platforms {
		name := ArchiveName(version, p)
		got, err := FileSHA256(filepath.Join(dist, name))
		switch {
		case err != nil:
			errs = append(errs, fmt.Errorf("%s: %w", p.Registry, err))
		case sums[name] == "":
			errs = append(errs, fmt.Errorf("%s: %s is not in checksums.txt", p.Registry, name))
		case sums[name] != got:
			errs = append(errs, fmt.Errorf("%s: %s has SHA-256 %s, checksums.txt says %s", p.Registry, name, got, sums[name]))
		}
	}
	return errors.Join(errs...)
}

// DistVersion is the version GoReleaser built, from dist/metadata.json.
func DistVersion(dist string) (string, error) {
	b, err := os.ReadFile(filepath.Join(dist, "metadata.json"))
	if err != nil {
		return "", err
	}
	var m struct {
		Version string `json:"version"`
	}
	if err := json.Unmarshal(b, &m); err != nil {
		return "", fmt.Errorf("metadata.json: %w", err)
	}
	if m.Version == "" {
		return "", errors.New("metadata.json: no version")
	}
	return m.Version, nil
}

// Write checks dist's archives and writes the registry folder
// dist/registry/acpd (agent.json and icon.svg); it returns the folder.
func Write(dist, baseURL string, icon []byte) (string, error) {
	version, err := DistVersion(dist)
	if err != nil {
		return "", err
	}
	if err := CheckArchives(dist, version); err != nil {
		return "", err
	}
	dir := filepath.Join(dist, "registry", "acpd")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	b, err := json.MarshalIndent(Entry(version, baseURL), "", "  ")
	if err != nil {
		return "", err
	}
	if err := os.WriteFile(filepath.Join(dir, "agent.json"), append(b, '\n'), 0o644); err != nil {
		return "", err
	}
	return dir, os.WriteFile(filepath.Join(dir, "icon.svg"), icon, 0o644)
}

func main() {
	dist := flag.String("dist", "dist", "GoReleaser's output folder")
	baseURL := flag.String("base-url", Repository+"/releases/download", "where the release's archives are downloaded from: BASE/vVERSION/ARCHIVE")
	icon := flag.String("icon", filepath.Join("release", "icon.svg"), "the registry icon")
	flag.Parse()
	b, err := os.ReadFile(*icon)
	if err == nil {
		var dir string
		dir, err = Write(*dist, *baseURL, b)
		if err == nil {
			fmt.Println(filepath.Join(dir, "agent.json"))
			return
		}
	}
	fmt.Fprintln(os.Stderr, "release:", err)
	os.Exit(1)
}
