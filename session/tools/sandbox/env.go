package sandbox

import (
	"slices"
	"strings"
)

// EnvPolicy decides which of acpd's environment variables a command
// inherits. A command runs what the model asks for, and the model may be
// steered by the workspace, so the variables acpd reads credentials from
// must not reach it: `echo $OPENAI_API_KEY` would print the key, and a
// steered command could send it anywhere the network lets it. Everything
// else of the user's environment is kept (PATH, HOME, locale, tool
// settings), as commands expect.
//
// Dropped, unless Pass names the variable:
//   - Drop: the variables acpd itself reads a credential from (every
//     provider's key variable, the configured apiKeyEnv names, the serve
//     token's variable), from the configuration;
//   - every ACPD_* variable (acpd's own settings; a command has no use for
//     them and some, such as a token's variable, may be named so);
//   - the OTLP exporters' header variables, which carry collector
//     credentials (OTEL_EXPORTER_OTLP_HEADERS and its per-signal forms);
//   - any name that says it holds a secret: one with a part (between
//     underscores) ending in KEY, SECRET, TOKEN, PASSWORD, PASSWD or
//     CREDENTIAL, or their plurals, in any case (GITHUB_TOKEN,
//     AWS_SECRET_ACCESS_KEY, AWS_ACCESS_KEY_ID, npm_config__authToken,
//     PGPASSWORD, GOOGLE_APPLICATION_CREDENTIALS). Codex CLI drops names
//     containing KEY, SECRET or TOKEN by default; matching the end of a
//     part keeps TOKENIZERS_PARALLELISM and zsh's KEYTIMEOUT, and git's
//     GIT_CONFIG_KEY_<n> (acpd's own settings for git) are kept.
//
// The zero value drops the built-in names and patterns only.
type EnvPolicy struct {
	// Drop are further exact names to drop (the configured credentials).
	Drop []string
	// Pass are exact names that reach commands whatever the rules above
	// say (tools.sandboxPassEnv): the user passes them deliberately.
	Pass []string
}

// ProviderKeyEnv are the key variables of the providers acpd knows, dropped
// whether or not this configuration uses them: a key in the environment is
// a key, whichever acpd reads.
var ProviderKeyEnv = []string{"OPENAI_API_KEY", "ANTHROPIC_API_KEY", "GEMINI_API_KEY", "GOOGLE_API_KEY"}

// secretWords mark a variable name as a secret's.
var secretWords = []string{"KEY", "SECRET", "TOKEN", "PASSWORD", "PASSWD", "CREDENTIAL"}

// Drops reports whether name is dropped from a command's environment.
func (e EnvPolicy) Drops(name string) bool {
	if slices.Contains(e.Pass, name) {
		return false
	}
	if slices.Contains(e.Drop, name) || slices.Contains(ProviderKeyEnv, name) {
		return true
	}
	upper := strings.ToUpper(name)
	if strings.HasPrefix(upper, "ACPD_") {
		return true
	}
	if strings.HasPrefix(upper, "OTEL_EXPORTER_OTLP_") && strings.HasSuffix(upper, "HEADERS") {
		return true
	}
	if n, ok := strings.CutPrefix(upper, "GIT_CONFIG_KEY_"); ok && n != "" && strings.Trim(n, "0123456789") == "" {
		return false
	}
	for part := range strings.SplitSeq(upper, "_") {
		for _, w := range secretWords {
			if strings.HasSuffix(part, w) || strings.HasSuffix(part, w+"S") {
				return true
			}
		}
	}
	return false
}

// Filter returns environ ("NAME=value" entries) without the dropped
// variables, and the names it dropped.
func (e EnvPolicy) Filter(environ []string) (kept, dropped []string) {
	kept = make([]string, 0, len(environ))
	for _, kv := range environ {
		name, _, _ := strings.Cut(kv, "=")
		if e.Drops(name) {
			dropped = append(dropped, name)
			continue
		}
		kept = append(kept, kv)
	}
	return kept, dropped
}

// Describe says in one line what commands do not inherit, for `acpd
// config` and `acpd doctor`.
func (e EnvPolicy) Describe() string {
	names := slices.Clone(ProviderKeyEnv)
	for _, n := range e.Drop {
		if !slices.Contains(names, n) {
			names = append(names, n)
		}
	}
	names = slices.DeleteFunc(names, func(n string) bool { return slices.Contains(e.Pass, n) })
	s := "commands do not inherit " + strings.Join(names, ", ") +
		", ACPD_*, OTEL_EXPORTER_OTLP_*HEADERS, or any variable with a name part ending in " + strings.Join(secretWords, ", ")
	if len(e.Pass) > 0 {
		s += "; passed deliberately (tools.sandboxPassEnv): " + strings.Join(e.Pass, ", ")
	}
	return s
}

// helperArgs are the helper's flags that carry the policy, so that a
// helper the editor's terminal starts — whose environment is the editor's,
// not acpd's — filters the same way before it runs the command.
func (e EnvPolicy) helperArgs() []string {
	var out []string
	for _, n := range e.Drop {
		out = append(out, "--env-drop", n)
	}
	for _, n := range e.Pass {
		out = append(out, "--env-pass", n)
	}
	return out
}
