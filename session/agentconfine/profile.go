// Package agentconfine runs another ACP agent in acpd's shell sandbox, for
// `acpd guard --confine`: the agent's whole process tree gets what a
// confined shell command gets (writes only where allowed, the deny list of
// secrets, a scrubbed environment, the network open, off or only through
// acpd's proxy), widened by what the agent needs to work at all: its own
// state folders, its own credential file, its own provider key variable
// and its provider's host. Those needs are the agent's profile, found from
// its command line.
package agentconfine

import (
	"errors"
	"io/fs"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"

	sbx "github.com/acpd/acpd/session/tools/sandbox"
)

// profile is what one kind of agent needs beyond a confined command.
type profile struct {
	name string
	// words are the names that identify the agent among the path
	// components of its command line (the program, or the script node
	// runs: .../@qwen-code/qwen-code/cli-entry.js).
	words []string
	// paths lists the agent's state (written: folders, and files such as
	// ~/.claude.json) and its credential files (taken off the deny list),
	// from the home folder and the agent's own variables.
	paths func(home string, getenv func(string) string) (dirs, files, creds []string)
	// keyEnv are the variables the agent reads its provider key from:
	// passed through, whatever the secret-name rules say.
	keyEnv []string
	// hosts are its provider's hosts (and its sign-in's), allowed through
	// the proxy.
	hosts []string
	// baseURLEnv and baseURLFlags name a configured provider address
	// (environment, command-line flag), whose host:port is allowed too.
	baseURLEnv, baseURLFlags []string
}

// orHome is getenv(name) when set, else home/rel.
func orHome(getenv func(string) string, name, home, rel string) string {
	if v := getenv(name); v != "" && filepath.IsAbs(v) {
		return v
	}
	return filepath.Join(home, rel)
}

// The agents the issue names, from their documentation and their files on
// disk. Claude's adapter runs Claude Code, which keeps its settings,
// sessions and OAuth credentials in ~/.claude (CLAUDE_CONFIG_DIR) and its
// account state in ~/.claude.json; Codex everything in ~/.codex
// (CODEX_HOME); Gemini CLI and qwen-code in ~/.gemini and ~/.qwen; OpenCode
// follows XDG (data, config, state; its cache goes to the sandbox's cache
// folder like every tool's).
var profiles = []profile{
	{name: "claude", words: []string{"claude-code-acp", "claude-agent-acp", "claude"},
		paths: func(home string, getenv func(string) string) ([]string, []string, []string) {
			dir := orHome(getenv, "CLAUDE_CONFIG_DIR", home, ".claude")
			return []string{dir}, []string{filepath.Join(home, ".claude.json")}, []string{filepath.Join(dir, ".credentials.json")}
		},
		keyEnv:     []string{"ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN", "CLAUDE_CODE_OAUTH_TOKEN"},
		hosts:      []string{"api.anthropic.com", "console.anthropic.com", "claude.ai"},
		baseURLEnv: []string{"ANTHROPIC_BASE_URL"}},
	{name: "codex", words: []string{"codex-acp", "codex"},
		paths: func(home string, getenv func(string) string) ([]string, []string, []string) {
			dir := orHome(getenv, "CODEX_HOME", home, ".codex")
			return []string{dir}, nil, []string{filepath.Join(dir, "auth.json")}
		},
		keyEnv:     []string{"OPENAI_API_KEY", "CODEX_API_KEY"},
		hosts:      []string{"api.openai.com", "chatgpt.com", "auth.openai.com"},
		baseURLEnv: []string{"OPENAI_BASE_URL"}},
	{name: "gemini", words: []string{"gemini-cli", "gemini"},
		paths: func(home string, _ func(string) string) ([]string, []string, []string) {
			dir := filepath.Join(home, ".gemini")
			return []string{dir}, nil, []string{filepath.Join(dir, "oauth_creds.json")}
		},
		keyEnv:     []string{"GEMINI_API_KEY", "GOOGLE_API_KEY", "GOOGLE_APPLICATION_CREDENTIALS"},
		hosts:      []string{"generativelanguage.googleapis.com", "cloudcode-pa.googleapis.com", "oauth2.googleapis.com"},
		baseURLEnv: []string{"GOOGLE_GEMINI_BASE_URL"}},
	{name: "qwen-code", words: []string{"@qwen-code", "qwen-code", "qwen"},
		paths: func(home string, _ func(string) string) ([]string, []string, []string) {
			dir := filepath.Join(home, ".qwen")
			return []string{dir}, nil, []string{filepath.Join(dir, "oauth_creds.json")}
		},
		keyEnv:       []string{"OPENAI_API_KEY", "DASHSCOPE_API_KEY"},
		hosts:        []string{"dashscope.aliyuncs.com", "dashscope-intl.aliyuncs.com", "chat.qwen.ai", "portal.qwen.ai"},
		baseURLEnv:   []string{"OPENAI_BASE_URL"},
		baseURLFlags: []string{"--openai-base-url"}},
	{name: "opencode", words: []string{"opencode-ai", "opencode"},
		paths: func(home string, getenv func(string) string) ([]string, []string, []string) {
			data := filepath.Join(orHome(getenv, "XDG_DATA_HOME", home, ".local/share"), "opencode")
			return []string{data,
				filepath.Join(orHome(getenv, "XDG_CONFIG_HOME", home, ".config"), "opencode"),
				filepath.Join(orHome(getenv, "XDG_STATE_HOME", home, ".local/state"), "opencode"),
			}, nil, []string{filepath.Join(data, "auth.json")}
		},
		// OpenCode talks to whichever provider it is set up for; the two
		// it is most often set up for pass, others by tools.sandboxPassEnv.
		keyEnv: []string{"ANTHROPIC_API_KEY", "OPENAI_API_KEY"},
		hosts:  []string{"api.anthropic.com", "api.openai.com", "models.dev", "opencode.ai"}},
}

// Needs is what a guarded agent gets beyond a confined command's sandbox.
type Needs struct {
	// Agent is the profile's name, "" for an agent acpd does not know
	// (which then gets exactly a confined command's sandbox).
	Agent string
	// Dirs are its state folders and the npm cache npx runs agents
	// from, Files its state files (JSON), all made when missing
	// (MakeState).
	Dirs, Files []string
	// Readable are its own credential files, taken off the deny list.
	Readable []string
	// PassEnv are its provider key variables.
	PassEnv []string
	// Hosts are host patterns (host or host:port) allowed through the
	// proxy: its provider's, and the address it is configured to use.
	Hosts []string
}

// For finds the agent of argv and what it needs; environ is the
// environment it is started with (HOME, its own variables).
func For(argv, environ []string) Needs {
	getenv := func(name string) string {
		for i := len(environ) - 1; i >= 0; i-- {
			if v, ok := strings.CutPrefix(environ[i], name+"="); ok {
				return v
			}
		}
		return ""
	}
	home := getenv("HOME")
	var n Needs
	if home != "" {
		// npx (and npm exec) run agents from the npm cache, which they
		// also write; acpd leaves the agent that cache rather than point
		// it at the sandbox's own, where npx would download them again.
		n.Dirs = append(n.Dirs, filepath.Join(home, ".npm"))
	}
	p := detect(argv)
	if p == nil {
		return n
	}
	n.Agent = p.name
	if home != "" {
		dirs, files, creds := p.paths(home, getenv)
		n.Dirs = append(n.Dirs, dirs...)
		n.Files, n.Readable = files, creds
	}
	n.PassEnv = slices.Clone(p.keyEnv)
	n.Hosts = slices.Clone(p.hosts)
	for _, e := range p.baseURLEnv {
		if h := hostOf(getenv(e)); h != "" {
			n.Hosts = append(n.Hosts, h)
		}
	}
	for i, a := range argv {
		for _, f := range p.baseURLFlags {
			v, ok := strings.CutPrefix(a, f+"=")
			if !ok && a == f && i+1 < len(argv) {
				v, ok = argv[i+1], true
			}
			if h := hostOf(v); ok && h != "" {
				n.Hosts = append(n.Hosts, h)
			}
		}
	}
	return n
}

// detect is the profile whose word is a path component of the program or
// of one of its arguments (node's script, npx's package), nil for none.
func detect(argv []string) *profile {
	for _, a := range argv {
		if strings.HasPrefix(a, "-") {
			continue
		}
		parts := strings.FieldsFunc(a, func(r rune) bool { return r == '/' || r == '\\' })
		for i := range profiles {
			p := &profiles[i]
			for _, part := range parts {
				part = strings.TrimSuffix(part, ".exe")
				if at := strings.LastIndex(part, "@"); at > 0 {
					part = part[:at] // npx's package@version
				}
				if slices.Contains(p.words, part) {
					return p
				}
			}
		}
	}
	return nil
}

// hostOf is a URL's host:port as a proxy pattern ("" when it is not an
// http(s) URL). The port is kept so that a loopback address allows only
// that service.
func hostOf(raw string) string {
	u, err := url.Parse(strings.TrimSpace(raw))
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Hostname() == "" {
		return ""
	}
	port := u.Port()
	if port == "" {
		port = "443"
		if u.Scheme == "http" {
			port = "80"
		}
	}
	return net.JoinHostPort(strings.ToLower(u.Hostname()), port)
}

// MakeState makes the state folders that do not exist yet (0700, as the
// agents make them) and the state files as empty JSON objects (0600):
// Landlock grants only what exists, and an agent that cannot create its
// ~/.claude.json at its first confined run would never have one. An empty
// object is what the agents read as "no settings yet".
func (n Needs) MakeState() error {
	for _, d := range n.Dirs {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return err
		}
	}
	for _, f := range n.Files {
		fh, err := os.OpenFile(f, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
		if errors.Is(err, fs.ErrExist) {
			continue
		}
		if err != nil {
			return err
		}
		_, err = fh.WriteString("{}\n")
		if cerr := fh.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// Apply widens the sandbox settings of confined commands by n: its
// writable paths, its credentials off the deny list, its key variables
// passed, its hosts allowed.
func (n Needs) Apply(s sbx.Settings) sbx.Settings {
	s.Writable = append(append(slices.Clone(s.Writable), n.Dirs...), n.Files...)
	s.DenyRead = slices.DeleteFunc(slices.Clone(s.DenyRead), func(p string) bool { return slices.Contains(n.Readable, p) })
	s.Env.Pass = append(slices.Clone(s.Env.Pass), n.PassEnv...)
	s.AllowedDomains = append(slices.Clone(s.AllowedDomains), n.Hosts...)
	return s
}
