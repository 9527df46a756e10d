package docs

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/acpd/acpd/acp/acptest"
	"github.com/acpd/acpd/config"
)

func TestMain(m *testing.M) {
	code := m.Run()
	acptest.RemoveAcpd() // built for the shell examples
	os.Exit(code)
}

// frontPageMaxLines keeps the README a front page; the reference lives here.
const frontPageMaxLines = 300

// repoRoot is the repository root, the parent of this package's folder.
func repoRoot(t *testing.T) string {
	t.Helper()
	root, err := filepath.Abs("..")
	require.NoError(t, err)
	return root
}

// pages reads README.md and every docs/*.md.
func pages(t *testing.T) []*page {
	t.Helper()
	root := repoRoot(t)
	names, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	require.NoError(t, err)
	require.NotEmpty(t, names)
	names = append([]string{filepath.Join(root, "README.md")}, names...)
	var out []*page
	for _, n := range names {
		b, err := os.ReadFile(n)
		require.NoError(t, err)
		rel, err := filepath.Rel(root, n)
		require.NoError(t, err)
		out = append(out, parsePage(filepath.ToSlash(rel), string(b)))
	}
	return out
}

// TestLinks checks every relative link of README.md and docs/*.md: the file
// exists, and a #anchor names a heading (by GitHub's slug) or an id of it.
func TestLinks(t *testing.T) {
	t.Parallel()
	root := repoRoot(t)
	byPath := map[string]*page{}
	all := pages(t)
	for _, p := range all {
		byPath[p.path] = p
	}
	checked := 0
	for _, p := range all {
		for _, l := range p.links() {
			target := l.target
			if target == "" || regexp.MustCompile(`^[a-z][a-z0-9+.-]*:`).MatchString(target) {
				continue // absolute URLs are not checked (no network in CI)
			}
			checked++
			file, anchor, _ := strings.Cut(target, "#")
			where := fmt.Sprintf("%s:%d: link %q", p.path, l.line, target)
			dest := p.path
			if file != "" {
				dest = filepath.ToSlash(filepath.Join(filepath.Dir(p.path), file))
				if strings.HasPrefix(dest, "../") {
					t.Errorf("%s leaves the repository", where)
					continue
				}
				if _, err := os.Stat(filepath.Join(root, dest)); err != nil {
					t.Errorf("%s: no such file %s", where, dest)
					continue
				}
			}
			if anchor == "" {
				continue
			}
			tp := byPath[dest]
			if tp == nil {
				if !strings.HasSuffix(dest, ".md") {
					t.Errorf("%s: an anchor into %s, which is not a Markdown page", where, dest)
					continue
				}
				b, err := os.ReadFile(filepath.Join(root, dest))
				require.NoError(t, err)
				tp = parsePage(dest, string(b))
				byPath[dest] = tp
			}
			if !tp.anchors()[anchor] {
				var have []string
				for _, h := range tp.headings() {
					have = append(have, "#"+h.slug)
				}
				t.Errorf("%s: %s has no anchor #%s; its headings: %s", where, dest, anchor, strings.Join(have, " "))
			}
		}
	}
	assert.Greater(t, checked, 50, "the link scanner found almost no links")
}

// TestFrontPage keeps README.md a front page: short, and linking every page
// of docs/ (docs/notes-*.md are drafts waiting to be folded into a page).
func TestFrontPage(t *testing.T) {
	t.Parallel()
	all := pages(t)
	readme := all[0]
	require.Equal(t, "README.md", readme.path)
	n := strings.Count(strings.TrimRight(readme.text, "\n"), "\n") + 1
	assert.LessOrEqual(t, n, frontPageMaxLines, "README.md has %d lines; move detail into a page of docs/", n)

	linked := map[string]bool{}
	for _, l := range readme.links() {
		file, _, _ := strings.Cut(l.target, "#")
		linked[file] = true
	}
	for _, p := range all[1:] {
		if strings.HasPrefix(filepath.Base(p.path), "notes-") {
			continue
		}
		assert.True(t, linked[p.path], "README.md does not link %s", p.path)
	}
}

// oldSections are the sections of the README before it became a front page,
// and where each now lives. Each must stay one click from the front page.
var oldSections = map[string]string{
	"Set up":                            "#set-up",
	"Use it from an editor":             "docs/protocol.md",
	"Loop protection":                   "docs/loop-protection.md",
	"Which cap fired: the error data":   "docs/loop-protection.md#which-cap-fired-the-error-data",
	"The stuck window":                  "docs/loop-protection.md#the-stuck-window",
	"Decisions where the reference was": "docs/decisions.md",
	"Durable sessions":                  "docs/sessions.md#durable-sessions",
	"Long sessions: context management": "docs/sessions.md#context-management",
	"Headless turns: acpd run":          "docs/headless.md",
	"Try it offline":                    "docs/headless.md#try-it-offline",
	"Continuing a session":              "docs/headless.md#continuing-a-session",
	"Flags":                             "docs/headless.md#flags",
	"Output formats":                    "docs/headless.md#output-formats",
	"Exit status":                       "docs/headless.md#exit-status",
	"Turn statistics: acpd stats":       "docs/telemetry.md#turn-statistics-acpd-stats",
	"Project awareness":                 "docs/project.md",
	"What the model is told":            "docs/project.md#what-the-model-is-told",
	"Instruction files":                 "docs/project.md#instruction-files",
	"Slash commands":                    "docs/project.md#slash-commands",
	"Shell sandbox":                     "docs/sandbox.md",
	"Telemetry: OpenTelemetry":          "docs/telemetry.md#telemetry-opentelemetry",
	"Configuration":                     "docs/configuration.md",
	"[model] … [telemetry] key tables":  "docs/configuration.md#model",
	"Other flags and variables":         "docs/configuration.md#other-flags-and-variables",
	"Example configuration":             "docs/configuration.md#example",
	"How the code is laid out":          "docs/architecture.md#how-the-code-is-laid-out",
	"Benchmarks":                        "docs/benchmarks.md",
	"Tests and CI":                      "docs/architecture.md#tests-and-ci",
}

// TestFrontPageReachesOldSections: nothing that was in the README is more
// than one click away from it (TestLinks checks that each target resolves).
func TestFrontPageReachesOldSections(t *testing.T) {
	t.Parallel()
	readme := pages(t)[0]
	linked := map[string]bool{}
	for _, l := range readme.links() {
		linked[l.target] = true
	}
	for _, h := range readme.headings() {
		linked["#"+h.slug] = true
	}
	for name, target := range oldSections {
		assert.True(t, linked[target], "the old README section %q should be linked from the front page as %s", name, target)
	}
}

// TestJSONBlocks: every json block parses.
func TestJSONBlocks(t *testing.T) {
	t.Parallel()
	for _, p := range pages(t) {
		for _, b := range p.blocks {
			if b.lang == "json" {
				assert.True(t, json.Valid([]byte(strings.Join(b.body, "\n"))), "%s:%d: the json block does not parse", p.path, b.line)
			}
		}
	}
}

// TestTOMLBlocks: every toml block is a configuration file acpd loads, unless
// marked <!-- not-config -->.
func TestTOMLBlocks(t *testing.T) {
	t.Parallel()
	n := 0
	for _, p := range pages(t) {
		for _, b := range p.blocks {
			if b.lang != "toml" || b.marker == "not-config" {
				continue
			}
			n++
			dir := t.TempDir()
			path := filepath.Join(dir, "config.toml")
			require.NoError(t, os.WriteFile(path, []byte(strings.Join(b.body, "\n")), 0o600))
			env := map[string]string{"HOME": dir}
			_, _, err := config.Load(config.LoadOptions{ConfigPath: path, WorkDir: dir,
				Getenv: func(k string) string { return env[k] }})
			assert.NoError(t, err, "%s:%d: the toml block is not a configuration acpd accepts", p.path, b.line)
		}
	}
	assert.Positive(t, n)
}

// testFuncs are the Test, Benchmark, Fuzz and Example functions by package
// folder (relative to the repository root).
var testFuncs = sync.OnceValues(func() (map[string][]string, error) {
	out := map[string][]string{}
	re := regexp.MustCompile(`(?m)^func ((?:Test|Benchmark|Fuzz|Example)\w*)\(`)
	root, err := filepath.Abs("..")
	if err != nil {
		return nil, err
	}
	err = filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == "node_modules" || d.Name() == "testdata" || strings.HasPrefix(d.Name(), ".")) && path != root {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, "_test.go") {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(root, filepath.Dir(path))
		if err != nil {
			return err
		}
		for _, m := range re.FindAllStringSubmatch(string(b), -1) {
			out[filepath.ToSlash(rel)] = append(out[filepath.ToSlash(rel)], m[1])
		}
		return nil
	})
	return out, err
})

// allTestFuncs is testFuncs, and all their names in one list.
func allTestFuncs(t *testing.T) (byDir map[string][]string, every []string) {
	t.Helper()
	byDir, err := testFuncs()
	require.NoError(t, err)
	for _, fs := range byDir {
		every = append(every, fs...)
	}
	return byDir, every
}

// splitAlternatives splits a regexp at its top-level '|'.
func splitAlternatives(re string) []string {
	var out []string
	depth, start := 0, 0
	for i := 0; i < len(re); i++ {
		switch re[i] {
		case '\\':
			i++
		case '(', '[':
			depth++
		case ')', ']':
			depth--
		case '|':
			if depth == 0 {
				out = append(out, re[start:i])
				start = i + 1
			}
		}
	}
	return append(out, re[start:])
}

// TestGoTestCommands: every -run, -bench and -fuzz pattern the docs show with
// its packages matches a function there, alternative by alternative, and every
// Test/Benchmark/Fuzz function named in a code span exists.
func TestGoTestCommands(t *testing.T) {
	t.Parallel()
	funcs, every := allTestFuncs(t)
	prefixes := map[string][]string{"-run": {"Test", "Fuzz", "Example"}, "-bench": {"Benchmark"}, "-fuzz": {"Fuzz"}}
	checked := 0
	for _, p := range pages(t) {
		texts := p.codeSpans()
		for _, b := range p.blocks {
			if shellLangs[b.lang] {
				for _, c := range commands(b) {
					texts = append(texts, c.text)
				}
			}
		}
		for _, text := range texts {
			if regexp.MustCompile(`^(Test|Benchmark|Fuzz)[A-Z0-9_]\w*$`).MatchString(text) {
				assert.Contains(t, every, text, "%s: %s is not a function of any test file", p.path, text)
				continue
			}
			words := shellWords(text)
			var pkgs []string
			flags := map[string]string{}
			for i, w := range words {
				if strings.HasPrefix(w, "./") {
					pkgs = append(pkgs, strings.TrimSuffix(strings.TrimPrefix(w, "./"), "/"))
				}
				name, val, hasVal := strings.Cut(w, "=")
				if _, ok := prefixes[name]; ok {
					if !hasVal && i+1 < len(words) {
						val = words[i+1]
					}
					flags[name] = val
				}
			}
			if len(flags) == 0 || len(pkgs) == 0 {
				continue
			}
			var names []string
			for dir, fs := range funcs {
				for _, pkg := range pkgs {
					sub, tree := strings.CutSuffix(pkg, "...")
					sub = strings.TrimSuffix(sub, "/")
					if dir == pkg || tree && (sub == "" || sub == "." || dir == sub || strings.HasPrefix(dir, sub+"/")) {
						names = append(names, fs...)
					}
				}
			}
			for flag, pattern := range flags {
				if pattern == "^$" {
					continue
				}
				first := strings.Split(pattern, "/")[0]
				for _, alt := range splitAlternatives(first) {
					re, err := regexp.Compile(alt)
					if !assert.NoError(t, err, "%s: %s %s", p.path, flag, pattern) {
						continue
					}
					checked++
					found := slices.ContainsFunc(names, func(n string) bool {
						return re.MatchString(n) && slices.ContainsFunc(prefixes[flag], func(pre string) bool { return strings.HasPrefix(n, pre) })
					})
					assert.True(t, found, "%s: `%s`: %s %q matches nothing in %s", p.path, text, flag, alt, strings.Join(pkgs, " "))
				}
			}
		}
	}
	assert.Greater(t, checked, 20, "the scanner found almost no go test commands")
}

// TestMarkers: every marker names what it needs, and tested-by names a test
// that exists.
func TestMarkers(t *testing.T) {
	t.Parallel()
	_, every := allTestFuncs(t)
	for _, p := range pages(t) {
		for _, b := range p.blocks {
			key, val, _ := strings.Cut(b.marker, ":")
			val = strings.TrimSpace(val)
			switch key {
			case "":
			case "needs":
				assert.NotEmpty(t, val, "%s:%d: say what the block needs: <!-- needs: model -->", p.path, b.line)
			case "tested-by":
				assert.Contains(t, every, val, "%s:%d: tested-by names no test function", p.path, b.line)
			case "not-config":
				assert.Equal(t, "toml", b.lang, "%s:%d: not-config marks toml blocks only", p.path, b.line)
			default:
				if strings.HasPrefix(b.marker, "needs") || strings.HasPrefix(b.marker, "tested") {
					t.Errorf("%s:%d: malformed marker %q", p.path, b.line, b.marker)
				}
			}
		}
	}
}

// wrapper is the acpd on the examples' PATH: it runs the real binary and
// records each exit status, so the test knows how every call ended.
const wrapper = `#!/bin/sh
"$ACPD_DOCTEST_REAL" "$@"
status=$?
echo "$status" >> "$ACPD_DOCTEST_LOG"
exit $status
`

// TestShellExamples runs every shell block of the docs that calls acpd,
// offline, unless a marker says it needs a real model or another test runs
// it. The rules are in architecture.md, section "Documentation".
func TestShellExamples(t *testing.T) {
	t.Parallel()
	type runnable struct {
		b        block
		expected []int
	}
	byPage := map[string][]runnable{}
	var order []string
	for _, p := range pages(t) {
		for _, b := range p.blocks {
			if !shellLangs[b.lang] {
				continue
			}
			var expected []int
			var paths []string
			for _, c := range commands(b) {
				n, ps := acpdCalls(c)
				for range n {
					expected = append(expected, expectedExit(b, c))
				}
				paths = append(paths, ps...)
			}
			if len(expected) == 0 || b.marker != "" {
				continue
			}
			if len(paths) > 0 {
				t.Errorf("%s:%d: call acpd from the PATH in examples, not %s (or mark the block; see architecture.md#documentation)", p.path, b.line, strings.Join(paths, ", "))
				continue
			}
			if len(byPage[p.path]) == 0 {
				order = append(order, p.path)
			}
			byPage[p.path] = append(byPage[p.path], runnable{b: b, expected: expected})
		}
	}
	require.NotEmpty(t, order)
	if testing.Short() {
		t.Skip("runs the docs' shell examples with the built acpd")
	}
	acpdBin := acptest.Acpd(t)

	for _, path := range order {
		t.Run(path, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			bin, home, work, tmp := filepath.Join(dir, "bin"), filepath.Join(dir, "home"), filepath.Join(dir, "work"), filepath.Join(dir, "tmp")
			for _, d := range []string{bin, home, work, tmp} {
				require.NoError(t, os.MkdirAll(d, 0o755))
			}
			require.NoError(t, os.WriteFile(filepath.Join(bin, "acpd"), []byte(wrapper), 0o755))
			state := filepath.Join(dir, "cwd")
			require.NoError(t, os.WriteFile(state, []byte(work), 0o600))
			log := filepath.Join(dir, "statuses")
			env := []string{
				"PATH=" + bin + string(os.PathListSeparator) + os.Getenv("PATH"),
				"HOME=" + home, "TMPDIR=" + tmp, "LANG=C.UTF-8",
				"XDG_CONFIG_HOME=" + filepath.Join(home, ".config"),
				"XDG_STATE_HOME=" + filepath.Join(home, ".local", "state"),
				"XDG_CACHE_HOME=" + filepath.Join(home, ".cache"),
				"ACPD_DOCTEST_REAL=" + acpdBin, "ACPD_DOCTEST_LOG=" + log,
			}
			for _, r := range byPage[path] {
				where := fmt.Sprintf("%s:%d", path, r.b.line)
				if needsMissingTool(t, where, r.b) {
					continue
				}
				require.NoError(t, os.WriteFile(log, nil, 0o600))
				var body []string
				for _, c := range commands(r.b) {
					if r.b.lang == "console" {
						body = append(body, c.text)
					}
				}
				if r.b.lang != "console" {
					body = r.b.body
				}
				script := fmt.Sprintf("cd \"$(cat %q)\" || exit 99\n%s\npwd > %q\n", state, strings.Join(body, "\n"), state)
				ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
				cmd := exec.CommandContext(ctx, "bash", "--noprofile", "--norc", "-c", script)
				cmd.Env = env
				cmd.Dir = work
				out, runErr := cmd.CombinedOutput()
				cancel()
				raw, err := os.ReadFile(log)
				require.NoError(t, err)
				got := []int{}
				for _, f := range strings.Fields(string(raw)) {
					var n int
					_, err := fmt.Sscan(f, &n)
					require.NoError(t, err)
					got = append(got, n)
				}
				if !slices.Equal(got, r.expected) {
					t.Errorf("%s: the acpd calls of this block exited %v, want %v (a call that should not exit 0 says so with a comment `# exit N`; a block that needs a real model is marked <!-- needs: model -->)\nscript exit: %v\noutput:\n%s",
						where, got, r.expected, runErr, out)
				}
			}
		})
	}
}

// optionalTools are programs an example may use that a machine may lack; a
// block using one that is missing is skipped, saying so.
var optionalTools = []string{"jq"}

func needsMissingTool(t *testing.T, where string, b block) bool {
	t.Helper()
	text := strings.Join(b.body, "\n")
	for _, tool := range optionalTools {
		if regexp.MustCompile(`(^|[|;&(\s])` + tool + `\s`).MatchString(text) {
			if _, err := exec.LookPath(tool); err != nil {
				t.Logf("%s: skipped: %s is not installed", where, tool)
				return true
			}
		}
	}
	return false
}
