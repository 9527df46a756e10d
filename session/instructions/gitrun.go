package instructions

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/acpd/acpd/session/tools/sandbox"
)

// The environment block runs git on acpd's own initiative, before any
// prompt or permission, in a repository that may come from anywhere. Git's
// configuration can name programs to run — core.fsmonitor, filter drivers
// (selected per file by .gitattributes), hooks, the pager, external diff
// and textconv drivers, transports (core.sshCommand, ext::), credential
// helpers — and the repository's own .git/config (and whatever it
// includes) is as much workspace content as its files. Two independent
// layers keep git from starting any of them:
//
//  1. Settings given in GIT_CONFIG_COUNT/KEY/VALUE, which git ranks above
//     every configuration file, switch each of them off; the filter
//     drivers, whose names are free, are listed first (`git config`
//     starts nothing) and switched off by name. Every GIT_* variable of
//     acpd's environment is dropped, so none of them (GIT_DIR,
//     GIT_EXTERNAL_DIFF, GIT_CONFIG_PARAMETERS, GIT_TRACE…) applies. The
//     work tree is the folder holding .git, whatever core.worktree says.
//     Only builtin commands run (aliases cannot shadow them), with
//     --no-optional-locks (nothing is written, so no post-index-change
//     hook), submodules ignored (no git runs inside them), no renames, no
//     signature checks, no textconv or external diff.
//  2. Where the kernel can (Landlock, see sandbox.Policy.RunReadOnly),
//     git runs confined: it may execute no file but itself, write
//     nothing and open no IP socket — so a setting layer 1 missed still
//     cannot start a program. That holds in every sandbox mode: the mode
//     is about the model's commands, this costs one helper start.
//
// The git binary is the user's, from PATH: PATH is the user's own
// configuration, like the rest of acpd's environment, and is trusted (a
// workspace root may well be a home folder holding ~/.local/bin/git).

// safeConfig is layer 1's fixed part.
var safeConfig = [][2]string{
	{"core.fsmonitor", "false"},
	{"core.hooksPath", "/dev/null"},
	{"core.pager", "cat"},
	{"core.untrackedCache", "false"},
	{"core.alternateRefsCommand", ""},
	{"log.showSignature", "false"},
	{"status.submoduleSummary", "false"},
	{"submodule.recurse", "false"},
	{"diff.external", ""},
	// Plain text for the prompt, whatever the repository asks for.
	{"color.ui", "never"},
	{"color.status", "never"},
	// No transport at all (ssh and its core.sshCommand, ext::, file):
	// reading the local repository needs none.
	{"protocol.allow", "never"},
	{"credential.helper", ""},
	{"core.askPass", ""},
}

// gitRunner runs the environment block's git commands.
type gitRunner struct {
	path string // the user's git, absolute; "" when there is none
	err  error  // why there is none
	sb   *sandbox.Policy
}

func newGitRunner(sb *sandbox.Policy) *gitRunner {
	path, err := exec.LookPath("git")
	if err == nil && !filepath.IsAbs(path) {
		err = fmt.Errorf("git on PATH is not an absolute path: %s", path)
	}
	if err != nil {
		return &gitRunner{err: err, sb: sb}
	}
	return &gitRunner{path: path, sb: sb}
}

// gitEnviron is git's environment: acpd's without GIT_*, the work tree, and
// the safe settings with every named filter driver switched off.
func gitEnviron(top string, filters []string) []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "GIT_") {
			env = append(env, kv)
		}
	}
	env = append(env, "GIT_OPTIONAL_LOCKS=0", "GIT_TERMINAL_PROMPT=0", "GIT_PAGER=cat", "PAGER=cat", "LC_ALL=C", "GIT_WORK_TREE="+top)
	cfg := slices.Clone(safeConfig)
	for _, f := range filters {
		cfg = append(cfg, [2]string{"filter." + f + ".clean", ""}, [2]string{"filter." + f + ".smudge", ""},
			[2]string{"filter." + f + ".process", ""}, [2]string{"filter." + f + ".required", "false"})
	}
	env = append(env, "GIT_CONFIG_COUNT="+strconv.Itoa(len(cfg)))
	for i, kv := range cfg {
		n := strconv.Itoa(i)
		env = append(env, "GIT_CONFIG_KEY_"+n+"="+kv[0], "GIT_CONFIG_VALUE_"+n+"="+kv[1])
	}
	return env
}

// filterNames lists the filter drivers git's configuration (the
// repository's included) defines, from `git config`, which runs none.
func (g *gitRunner) filterNames(ctx context.Context, root, top string) ([]string, error) {
	out, err := g.run(ctx, root, top, nil, "config", "-z", "--name-only", "--get-regexp", `^filter\.`)
	var ee *exec.ExitError
	if errors.As(err, &ee) && ee.ExitCode() == 1 && len(out) == 0 {
		return nil, nil // none defined
	}
	if err != nil {
		return nil, err
	}
	var names []string
	for key := range strings.SplitSeq(string(out), "\x00") {
		// filter.<name>.<key>; the name may itself hold dots.
		rest, ok := strings.CutPrefix(key, "filter.")
		i := strings.LastIndexByte(rest, '.')
		if !ok || i <= 0 {
			continue
		}
		if name := rest[:i]; !slices.Contains(names, name) {
			names = append(names, name)
		}
	}
	return names, nil
}

// run runs `git ARGS` in root (work tree top) as described above and
// returns its stdout.
func (g *gitRunner) run(ctx context.Context, root, top string, filters []string, args ...string) ([]byte, error) {
	if g.path == "" {
		return nil, g.err
	}
	argv := append([]string{g.path, "--no-pager"}, args...)
	env := gitEnviron(top, filters)
	out, err := g.sb.RunReadOnly(ctx, root, env, argv)
	if errors.Is(err, sandbox.ErrCannotConfine) {
		out, err = sandbox.RunUnconfined(ctx, root, env, argv)
	}
	return out, err
}
