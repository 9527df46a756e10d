package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The command line as a user meets it, through the built binary.

// helpCommands are acpd and its subcommands, as help names them.
var helpCommands = []string{"", "run", "serve", "guard", "doctor", "config", "stats", "sessions", "checkpoints", "completion", "help"}

// TestCLI_HelpOnStdout: every way of asking for help (--help, -h, acpd help
// CMD) prints the command's own help on stdout and exits 0, so
// `acpd run --help | less` works; the global flags are listed once, under
// their heading, after the command's own.
func TestCLI_HelpOnStdout(t *testing.T) {
	t.Parallel()
	e := newRunEnv(t)
	for _, name := range helpCommands {
		words := strings.Fields(name)
		for _, args := range [][]string{append(words, "--help"), append(words, "-h"), append([]string{"help"}, words...)} {
			o := e.run(t, "", args...)
			where := "acpd " + strings.Join(args, " ")
			require.Equal(t, 0, o.code, "%s: %s", where, o.stderr)
			assert.Empty(t, o.stderr, where)
			assert.Contains(t, o.stdout, "Usage:\n  "+strings.TrimSpace("acpd "+name), where)
			assert.Equal(t, 1, strings.Count(o.stdout, "\nGlobal flags:\n"), "%s: one heading of global flags\n%s", where, o.stdout)
			for _, global := range []string{"--config file", "--log-level string", "--data-dir path", "-h, --help"} {
				assert.Equal(t, 1, strings.Count(o.stdout, global), "%s: %s listed once", where, global)
			}
			global := o.stdout[strings.Index(o.stdout, "\nGlobal flags:\n"):]
			assert.NotContains(t, global, "--model", "%s: the global flags are the global ones only", where)
		}
	}
}

// TestCLI_HelpShowsOwnFlags: a command's help lists the flags it reads —
// with the value each takes and its default — and not the ones it would
// ignore.
func TestCLI_HelpShowsOwnFlags(t *testing.T) {
	t.Parallel()
	e := newRunEnv(t)
	tests := []struct {
		cmd        string
		want, omit []string
	}{
		{"run", []string{"-o, --output-format format", "(default text)", "--approval-mode string", `(default "default")`,
			"--max-tool-calls-per-turn int", "--loop-detection ", "--model string", "\nModel flags:\n", "\nLoop protection flags:\n",
			"\n  0    the turn ended normally", "\n  3    loop protection stopped the turn"},
			[]string{"--guard-cancel-grace", "--listen", "--skip-loop-detection", "--format "}},
		{"guard", []string{"--max-tool-calls-per-turn int", "--guard-cancel-grace duration", "(default 2s)", "--telemetry "},
			[]string{"--model ", "--approval-mode", "--listen", "--sandbox "}},
		{"stats", []string{"-o, --output-format format", "table, json or csv", "--explicit", "--stuck-window int", "--since time"},
			[]string{"--model ", "--format ", "--guard-cancel-grace"}},
		{"sessions", []string{"-o, --output-format format", "table or json"}, []string{"--model ", "--max-tool-calls-per-turn"}},
		{"serve", []string{"--listen string", "--tls-cert path", "--init-token", "--model string"}, []string{"--guard-cancel-grace"}},
		{"doctor", []string{"--listen string", "--base-url string", `"https://api.openai.com/v1")`}, []string{"--guard-cancel-grace"}},
		{"", []string{"\nCommands:\n", "  run ", "  completion ", "--version", "--model string"}, []string{"--listen string", "--guard-cancel-grace"}},
	}
	for _, tt := range tests {
		o := e.run(t, "", strings.Fields(tt.cmd+" --help")...)
		require.Equal(t, 0, o.code, o.stderr)
		for _, w := range tt.want {
			assert.Contains(t, o.stdout, w, "acpd %s --help", tt.cmd)
		}
		for _, w := range tt.omit {
			assert.NotContains(t, o.stdout, w, "acpd %s --help", tt.cmd)
		}
		for line := range strings.Lines(o.stdout) {
			assert.LessOrEqual(t, len([]rune(strings.TrimRight(line, "\n"))), helpWidth, "acpd %s --help: a line past %d columns: %q", tt.cmd, helpWidth, line)
		}
	}
}

// TestCLI_UsageErrorsOneLine: a mistake on the command line is one line on
// stderr naming the flag or argument, with a pointer to the command's help,
// and exit status 2 — not the whole usage scrolling the message away.
func TestCLI_UsageErrorsOneLine(t *testing.T) {
	t.Parallel()
	e := newRunEnv(t)
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"run", "--yolo2", "x"}, "acpd run: unknown flag: --yolo2; see 'acpd run --help'"},
		{[]string{"run", "--model"}, "acpd run: flag needs an argument: --model; see 'acpd run --help'"},
		{[]string{"run", "-o", "xml", "x"}, `acpd run: invalid argument "xml" for "-o, --output-format" flag: must be text, json or stream-json; see 'acpd run --help'`},
		{[]string{"stats", "--since", "yesterday"}, `acpd stats: --since: want an RFC 3339 time, YYYY-MM-DD, or an age such as 36h or 7d, got "yesterday"; see 'acpd stats --help'`},
		{[]string{"--max-tool-calls-per-turn", "many"}, "acpd: flag --max-tool-calls-per-turn: Invalid maxToolCallsPerTurn: must be an integer, got many; see 'acpd --help'"},
		{[]string{"guard", "--model", "m", "--", "agent"}, "acpd guard: unknown flag: --model; see 'acpd guard --help'"},
		{[]string{"sessions", "extra"}, `acpd sessions: unexpected argument "extra"; see 'acpd sessions --help'`},
		{[]string{"hello"}, `acpd: unknown command "hello"; see 'acpd --help'`},
		{[]string{"help", "nope"}, `acpd help: unknown command "nope"; see 'acpd --help'`},
		{[]string{"checkpoints", "--show", "2"}, "acpd checkpoints: --show needs --session; see 'acpd checkpoints --help'"},
	}
	for _, tt := range tests {
		o := e.run(t, "", tt.args...)
		assert.Equal(t, 2, o.code, "acpd %v", tt.args)
		assert.Equal(t, tt.want+"\n", o.stderr, "acpd %v", tt.args)
		assert.Empty(t, o.stdout, "acpd %v", tt.args)
	}
}

// TestCLI_OldFlagNames: the renamed flags keep their old names, unlisted:
// --skip-loop-detection (now --loop-detection, said the positive way) and
// --format (now --output-format, one name for every command).
func TestCLI_OldFlagNames(t *testing.T) {
	t.Parallel()
	e := newRunEnv(t)
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"config", "--loop-detection"}, "skipLoopDetection = false  # flag --loop-detection\n"},
		{[]string{"config", "--loop-detection=false"}, "skipLoopDetection = true  # flag --loop-detection\n"},
		{[]string{"config", "--skip-loop-detection=false"}, "skipLoopDetection = false  # flag --skip-loop-detection\n"},
		{[]string{"sessions", "--format", "json"}, `"sessions": []`},
		{[]string{"sessions", "-o", "json"}, `"sessions": []`},
		{[]string{"stats", "--output-format", "json"}, `"turns": []`},
	} {
		o := e.run(t, "", tt.args...)
		require.Equal(t, 0, o.code, "acpd %v: %s", tt.args, o.stderr)
		assert.Contains(t, o.stdout, tt.want, "acpd %v", tt.args)
	}
}

// TestCLI_CompletionBash: acpd completion bash prints a script bash loads,
// and completing through it (which runs the binary's hidden __complete)
// offers the commands, a command's flags and an enum flag's values.
func TestCLI_CompletionBash(t *testing.T) {
	t.Parallel()
	bash, err := exec.LookPath("bash")
	if err != nil {
		t.Skip("no bash")
	}
	e := newRunEnv(t)
	for _, shell := range []string{"bash", "zsh", "fish"} {
		o := e.run(t, "", "completion", shell)
		require.Equal(t, 0, o.code, o.stderr)
		assert.Contains(t, o.stdout, "__complete", shell)
	}
	o := e.run(t, "", "completion", "bash")
	script := filepath.Join(e.dir, "acpd.bash")
	require.NoError(t, os.WriteFile(script, []byte(o.stdout), 0o644))
	bin := filepath.Join(e.dir, "bin")
	require.NoError(t, os.MkdirAll(bin, 0o755))
	require.NoError(t, os.Symlink(acpdBinary(t), filepath.Join(bin, "acpd")))

	complete := func(line string) []string {
		t.Helper()
		words := strings.Fields(line)
		if strings.HasSuffix(line, " ") {
			words = append(words, "")
		}
		quoted := make([]string, len(words))
		for i, w := range words {
			quoted[i] = "'" + w + "'"
		}
		prog := bashCompletionLib + "source " + script + "\n" +
			"COMP_WORDS=(" + strings.Join(quoted, " ") + ")\n" +
			"COMP_CWORD=" + strconv.Itoa(len(words)-1) + "\n" +
			"COMP_LINE='" + line + "'\nCOMP_POINT=${#COMP_LINE}\n" +
			"__start_acpd\nprintf '%s\\n' \"${COMPREPLY[@]}\"\n"
		cmd := exec.CommandContext(t.Context(), bash, "--noprofile", "--norc", "-c", prog)
		cmd.Env = append([]string{"PATH=" + bin + string(os.PathListSeparator) + os.Getenv("PATH")}, e.env[1:]...)
		// compopt, which sets the options of a completion under way, says
		// on stderr that none is: this one is run by hand.
		var stderr strings.Builder
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		require.NoError(t, err, "%s", stderr.String())
		return strings.Fields(string(out))
	}
	assert.Contains(t, complete("acpd ru"), "run")
	assert.Contains(t, complete("acpd sta"), "stats")
	assert.Contains(t, complete("acpd run --approval-"), "--approval-mode")
	assert.ElementsMatch(t, []string{"plan", "default", "auto-edit", "yolo"}, complete("acpd run --approval-mode "))
	assert.ElementsMatch(t, []string{"text", "json", "stream-json"}, complete("acpd run --output-format "))
	assert.NotContains(t, complete("acpd stats --"), "--format", "the old name is not offered")
}

// bashCompletionLib loads the bash-completion package's functions, which
// the generated script uses, or where the package is not installed defines
// the one it needs for a plain command line: the words and the word under
// the cursor, as the package's _get_comp_words_by_ref sets them.
const bashCompletionLib = `if [ -r /usr/share/bash-completion/bash_completion ]; then
  source /usr/share/bash-completion/bash_completion
else
  _get_comp_words_by_ref() {
    words=("${COMP_WORDS[@]}"); cword=$COMP_CWORD
    cur=${COMP_WORDS[COMP_CWORD]}; prev=${COMP_WORDS[COMP_CWORD-1]}
  }
fi
`
