package main

import (
	"archive/tar"
	"archive/zip"
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"encoding/xml"
	"fmt"
	"io"
	"net/url"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// registrySchema compiles the registry's agent.schema.json (testdata), with
// its formats (uri) asserted.
func registrySchema(t *testing.T) *jsonschema.Schema {
	t.Helper()
	f, err := os.Open(filepath.Join("testdata", "agent.schema.json"))
	require.NoError(t, err)
	defer f.Close()
	doc, err := jsonschema.UnmarshalJSON(f)
	require.NoError(t, err)
	c := jsonschema.NewCompiler()
	c.AssertFormat()
	require.NoError(t, c.AddResource("agent.schema.json", doc))
	s, err := c.Compile("agent.schema.json")
	require.NoError(t, err)
	return s
}

func validate(t *testing.T, s *jsonschema.Schema, b []byte) error {
	t.Helper()
	inst, err := jsonschema.UnmarshalJSON(bytes.NewReader(b))
	require.NoError(t, err)
	return s.Validate(inst)
}

// TestEntry_ValidAgainstTheRegistrySchema: the entry is what the registry
// accepts — every platform it knows, archive URLs, the licence — and the
// schema really is checked (a broken entry fails it).
func TestEntry_ValidAgainstTheRegistrySchema(t *testing.T) {
	s := registrySchema(t)
	b, err := json.Marshal(Entry("1.2.3", "https://github.com/acpd/acpd/releases/download"))
	require.NoError(t, err)
	require.NoError(t, validate(t, s, b))
	var a Agent
	require.NoError(t, json.Unmarshal(b, &a))
	assert.Equal(t, "Apache-2.0", a.License)
	require.Len(t, a.Distribution.Binary, 6)
	assert.Equal(t, Target{
		Archive: "https://github.com/acpd/acpd/releases/download/v1.2.3/acpd_1.2.3_windows_arm64.zip",
		Cmd:     "./acpd.exe",
	}, a.Distribution.Binary["windows-aarch64"])
	assert.Equal(t, "./acpd", a.Distribution.Binary["linux-x86_64"].Cmd)

	for name, broken := range map[string]string{
		"an unknown platform":          strings.Replace(string(b), `"linux-aarch64"`, `"linux-riscv64"`, 1),
		"a version that is not semver": strings.Replace(string(b), `"version":"1.2.3"`, `"version":"dev"`, 1),
		"an unknown field":             strings.Replace(string(b), `"cmd":"./acpd"`, `"cmd":"./acpd","sha256":"x"`, 1),
	} {
		assert.Error(t, validate(t, s, []byte(broken)), name)
	}
}

// TestIcon holds the registry's icon rules: 16×16, drawn in currentColor
// (so it follows the editor's theme), no colour of its own.
func TestIcon(t *testing.T) {
	b, err := os.ReadFile("icon.svg")
	require.NoError(t, err)
	var svg struct {
		XMLName xml.Name
		Width   string `xml:"width,attr"`
		Height  string `xml:"height,attr"`
		ViewBox string `xml:"viewBox,attr"`
	}
	require.NoError(t, xml.Unmarshal(b, &svg))
	assert.Equal(t, "svg", svg.XMLName.Local)
	assert.Equal(t, "16", svg.Width)
	assert.Equal(t, "16", svg.Height)
	assert.Equal(t, "0 0 16 16", svg.ViewBox)
	assert.Contains(t, string(b), "currentColor")
	for _, m := range regexp.MustCompile(`(?i)\b(fill|stroke)\s*[=:]\s*["']?([^"';\s>]+)`).FindAllStringSubmatch(string(b), -1) {
		assert.Contains(t, []string{"currentColor", "none"}, m[2], "%s=%s: the icon must draw in currentColor", m[1], m[2])
	}
	assert.NotRegexp(t, `(?i)#[0-9a-f]{3,8}\b|rgb\(|<style|<image|href=`, string(b), "no colours, styles or external images")
}

// fakeDist lays out what GoReleaser leaves in dist: an archive per
// platform, checksums.txt and metadata.json.
func fakeDist(t *testing.T, version string) string {
	t.Helper()
	dist := t.TempDir()
	var sums strings.Builder
	for _, p := range Platforms {
		name := ArchiveName(version, p)
		body := []byte("archive of " + p.Registry)
		require.NoError(t, os.WriteFile(filepath.Join(dist, name), body, 0o644))
		h := sha256.Sum256(body)
		fmt.Fprintf(&sums, "%s  %s\n", hex.EncodeToString(h[:]), name)
	}
	require.NoError(t, os.WriteFile(filepath.Join(dist, "checksums.txt"), []byte(sums.String()), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(dist, "metadata.json"), []byte(`{"project_name":"acpd","version":"`+version+`"}`), 0o644))
	return dist
}

// TestWrite: the registry folder is written from a dist whose archives
// match their checksums, and refused when one does not or is missing.
func TestWrite(t *testing.T) {
	dist := fakeDist(t, "0.4.0")
	dir, err := Write(dist, "https://example.org/dl", []byte("<svg/>"))
	require.NoError(t, err)
	b, err := os.ReadFile(filepath.Join(dir, "agent.json"))
	require.NoError(t, err)
	require.NoError(t, validate(t, registrySchema(t), b))
	assert.Contains(t, string(b), `"archive": "https://example.org/dl/v0.4.0/acpd_0.4.0_darwin_arm64.tar.gz"`)
	icon, err := os.ReadFile(filepath.Join(dir, "icon.svg"))
	require.NoError(t, err)
	assert.Equal(t, "<svg/>", string(icon))

	require.NoError(t, os.WriteFile(filepath.Join(dist, "acpd_0.4.0_linux_amd64.tar.gz"), []byte("tampered"), 0o644))
	require.NoError(t, os.Remove(filepath.Join(dist, "acpd_0.4.0_windows_amd64.zip")))
	_, err = Write(dist, "https://example.org/dl", nil)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "linux-x86_64: acpd_0.4.0_linux_amd64.tar.gz has SHA-256")
	assert.Contains(t, err.Error(), "windows-x86_64: ")
}

// TestReleaseDist checks a real release build, which CI makes with
// `goreleaser release --snapshot` beside the tests and points
// ACPD_RELEASE_DIST at: every platform's archive is there with the
// checksum checksums.txt lists and holds the binary and the licence;
// agent.json is valid against the registry's schema and names exactly
// those archives; and this machine's binary, taken out of its archive,
// prints the release's version and commit and answers initialize with the
// agent-type auth method the registry requires.
func TestReleaseDist(t *testing.T) {
	dist := os.Getenv("ACPD_RELEASE_DIST")
	if dist == "" {
		t.Skip("ACPD_RELEASE_DIST is not set: no release build to check (.ci/run makes one)")
	}
	version, err := DistVersion(dist)
	require.NoError(t, err)
	require.NoError(t, CheckArchives(dist, version))
	var meta struct {
		Commit string `json:"commit"`
	}
	b, err := os.ReadFile(filepath.Join(dist, "metadata.json"))
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(b, &meta))
	require.Len(t, meta.Commit, 40)

	entry, err := os.ReadFile(filepath.Join(dist, "registry", "acpd", "agent.json"))
	require.NoError(t, err)
	require.NoError(t, validate(t, registrySchema(t), entry))
	var a Agent
	require.NoError(t, json.Unmarshal(entry, &a))
	assert.Equal(t, version, a.Version)
	sums, err := ReadChecksums(filepath.Join(dist, "checksums.txt"))
	require.NoError(t, err)
	require.Len(t, a.Distribution.Binary, len(Platforms))
	for _, p := range Platforms {
		tg := a.Distribution.Binary[p.Registry]
		u, err := url.Parse(tg.Archive)
		require.NoError(t, err)
		name := path.Base(u.Path)
		assert.Equal(t, ArchiveName(version, p), name, p.Registry)
		got, err := FileSHA256(filepath.Join(dist, name))
		require.NoError(t, err)
		assert.Equal(t, sums[name], got, "%s: the archive agent.json names is the one checksums.txt lists", p.Registry)
		files := archiveFiles(t, filepath.Join(dist, name))
		assert.Contains(t, files, strings.TrimPrefix(tg.Cmd, "./"), p.Registry)
		assert.Contains(t, files, "LICENSE", p.Registry)
	}
	icon, err := os.ReadFile(filepath.Join(dist, "registry", "acpd", "icon.svg"))
	require.NoError(t, err)
	own, err := os.ReadFile("icon.svg")
	require.NoError(t, err)
	assert.Equal(t, own, icon)

	host := Platform{GOOS: runtime.GOOS, Arch: runtime.GOARCH}
	bin := extract(t, filepath.Join(dist, ArchiveName(version, host)), Binary(host))
	out, err := exec.Command(bin, "--version").CombinedOutput()
	require.NoError(t, err, string(out))
	assert.Equal(t, "acpd "+version+" (commit "+meta.Commit[:12]+")\n", string(out))

	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin)
	home := t.TempDir()
	cmd.Env = []string{"HOME=" + home, "XDG_CONFIG_HOME=" + filepath.Join(home, "config"), "XDG_STATE_HOME=" + filepath.Join(home, "state"), "PATH=" + os.Getenv("PATH")}
	cmd.Stdin = strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":1}}` + "\n")
	stdout, err := cmd.Output()
	require.NoError(t, err)
	line, _, _ := bytes.Cut(stdout, []byte("\n"))
	var init struct {
		Result struct {
			AgentInfo   struct{ Name, Version string }
			AuthMethods []struct {
				ID   string `json:"id"`
				Type string `json:"type"`
			} `json:"authMethods"`
		} `json:"result"`
	}
	require.NoError(t, json.Unmarshal(line, &init), string(line))
	assert.Equal(t, version, init.Result.AgentInfo.Version)
	agentAuth := false
	for _, m := range init.Result.AuthMethods {
		// An auth method without a type is the agent type (the default).
		agentAuth = agentAuth || m.Type == "" || m.Type == "agent"
	}
	assert.True(t, agentAuth, "the registry lists agents that offer agent or terminal auth: %s", line)
}

// archiveFiles lists the regular files of a .tar.gz or .zip archive.
func archiveFiles(t *testing.T, p string) []string {
	t.Helper()
	var names []string
	walkArchive(t, p, func(name string, _ io.Reader) { names = append(names, name) })
	return names
}

// extract copies one file out of an archive into a temporary folder and
// returns its path, executable.
func extract(t *testing.T, archive, name string) string {
	t.Helper()
	dst := filepath.Join(t.TempDir(), name)
	found := false
	walkArchive(t, archive, func(n string, r io.Reader) {
		if n != name {
			return
		}
		f, err := os.OpenFile(dst, os.O_CREATE|os.O_WRONLY, 0o755)
		require.NoError(t, err)
		_, err = io.Copy(f, r)
		require.NoError(t, err)
		require.NoError(t, f.Close())
		found = true
	})
	require.True(t, found, "%s has no %s", archive, name)
	return dst
}

func walkArchive(t *testing.T, p string, fn func(name string, r io.Reader)) {
	t.Helper()
	if strings.HasSuffix(p, ".zip") {
		zr, err := zip.OpenReader(p)
		require.NoError(t, err)
		defer zr.Close()
		for _, f := range zr.File {
			if f.FileInfo().Mode().IsRegular() {
				rc, err := f.Open()
				require.NoError(t, err)
				fn(f.Name, rc)
				rc.Close()
			}
		}
		return
	}
	f, err := os.Open(p)
	require.NoError(t, err)
	defer f.Close()
	gz, err := gzip.NewReader(bufio.NewReader(f))
	require.NoError(t, err)
	tr := tar.NewReader(gz)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return
		}
		require.NoError(t, err)
		if h.Typeflag == tar.TypeReg {
			fn(h.Name, tr)
		}
	}
}
