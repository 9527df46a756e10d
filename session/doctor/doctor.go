// Package doctor checks that acpd can run: the configuration, the model
// settings, the provider's endpoint, the data folder, the shell sandbox and
// the telemetry collector and `acpd serve`'s settings. `acpd doctor` prints
// one line per check. Checks run in the order of Checks; a package adding a
// check appends it there.
package doctor

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/netip"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/acpd/acpd/config"
	"github.com/acpd/acpd/session/credhttp"
	"github.com/acpd/acpd/session/mcp/imported"
	"github.com/acpd/acpd/session/model/gemini"
	"github.com/acpd/acpd/session/tools/sandbox"
)

// Status is a check's outcome.
type Status string

// Outcomes. A skipped check does not fail the run: it could not be decided
// (an earlier check failed) or it does not apply (no API key for a scripted
// model).
const (
	OK   Status = "ok"
	Fail Status = "FAIL"
	Skip Status = "skip"
)

// Result is one check's outcome and a one-line detail.
type Result struct {
	Status Status
	Detail string
}

// Env is what the checks look at.
type Env struct {
	Config  config.Config
	Sources config.Sources
	// ConfigErr is the error loading the configuration; Config is then
	// unusable and the checks that need it skip.
	ConfigErr error
	// HTTP makes the endpoint request; nil means a client with Timeout.
	HTTP *http.Client
	// Timeout bounds the endpoint request; 0 means DefaultTimeout.
	Timeout time.Duration
	// Sandbox is the shell sandbox the daemon would use, made by
	// sandbox.NewPolicy from Config (acpd doctor passes the daemon's own).
	Sandbox *sandbox.Policy
	// Getenv reads the server token's variable; nil means os.Getenv. (The
	// OTLP exporters read their variables from the environment themselves.)
	Getenv func(string) string
	// MCP is what the configurations of other agents give a session in
	// the current folder (session.ImportedMCP); nil skips the check.
	MCP func() imported.Found
	// Width, when positive, wraps each check's line at that column, its
	// detail going on under itself, for a person at a terminal; 0 keeps
	// one line per check, for grep and scripts.
	Width int
}

// timeout bounds one network check.
func (env *Env) timeout() time.Duration {
	if env.Timeout > 0 {
		return env.Timeout
	}
	return DefaultTimeout
}

// DefaultTimeout bounds `GET {baseUrl}/models`: long enough for a remote
// provider, short enough that a wrong host does not hang the command.
const DefaultTimeout = 5 * time.Second

// Check is one named check.
type Check struct {
	Name string
	Run  func(ctx context.Context, env *Env) Result
}

// Checks returns the checks in the order they run and print.
func Checks() []Check {
	return []Check{
		{Name: "configuration", Run: checkConfig},
		{Name: "model", Run: checkModelName},
		{Name: "api key", Run: checkAPIKey},
		{Name: "endpoint", Run: checkEndpoint},
		{Name: "providers", Run: checkProviders},
		{Name: "data folder", Run: checkDataDir},
		{Name: "shell sandbox", Run: checkSandbox},
		{Name: "telemetry", Run: checkTelemetry},
		{Name: "server", Run: checkServer},
		{Name: "imported mcp", Run: checkImportedMCP},
	}
}

// Run runs checks in order, printing one line per check to w (wrapped at
// env.Width, continued lines indented under the detail), and reports
// whether none failed.
func Run(ctx context.Context, env *Env, checks []Check, w io.Writer) bool {
	width := 0
	for _, c := range checks {
		width = max(width, len(c.Name))
	}
	ok := true
	for _, c := range checks {
		r := c.Run(ctx, env)
		if r.Status == Fail {
			ok = false
		}
		// A multi-line error (several config mistakes) is joined with "; ".
		detail := strings.Join(strings.Fields(strings.ReplaceAll(r.Detail, "\n", " ; ")), " ")
		head := fmt.Sprintf("%-4s  %-*s  ", r.Status, width, c.Name)
		if env.Width <= 0 {
			fmt.Fprintln(w, head+detail)
			continue
		}
		fmt.Fprint(w, wrap(head, detail, env.Width))
	}
	return ok
}

// wrap prints detail after head, broken at spaces so no line passes width
// (a word longer than the room is left whole), the continued lines
// indented to head's width.
func wrap(head, detail string, width int) string {
	indent := strings.Repeat(" ", len(head))
	room := max(width-len(head), 20)
	var b strings.Builder
	b.WriteString(head)
	n := 0
	for i, word := range strings.Fields(detail) {
		l := len([]rune(word))
		switch {
		case i == 0:
		case n+1+l > room:
			b.WriteString("\n" + indent)
			n = 0
		default:
			b.WriteByte(' ')
			n++
		}
		b.WriteString(word)
		n += l
	}
	b.WriteByte('\n')
	return b.String()
}

// noModel reports that neither a model nor an endpoint is configured: a
// first run. The model check says so once; the key and endpoint checks,
// which would fail for the same reason (and probe an endpoint nobody
// chose), skip.
func noModel(env *Env) bool {
	m := env.Config.Model
	return m.Provider != config.ProviderScript && m.Name == "" && len(env.Config.Providers) == 0 &&
		env.Sources.Of("model.baseUrl").Kind == config.SourceDefault
}

func skipNoModel() Result {
	return Result{Status: Skip, Detail: "no model or endpoint configured (see model above)"}
}

func skipNoConfig() Result {
	return Result{Status: Skip, Detail: "the configuration did not load"}
}

func checkConfig(_ context.Context, env *Env) Result {
	if env.ConfigErr != nil {
		return Result{Status: Fail, Detail: env.ConfigErr.Error()}
	}
	var files []string
	seen := map[string]bool{}
	for _, s := range env.Sources {
		if s.Kind == config.SourceFile && !seen[s.File] {
			seen[s.File] = true
			files = append(files, s.File)
		}
	}
	if len(files) == 0 {
		return Result{Status: OK, Detail: "valid (no config file sets a value; defaults, environment and flags)"}
	}
	slices.Sort(files) // stable output
	return Result{Status: OK, Detail: "valid (" + strings.Join(files, ", ") + ")"}
}

func checkModelName(_ context.Context, env *Env) Result {
	if env.ConfigErr != nil {
		return skipNoConfig()
	}
	m := env.Config.Model
	if m.Provider == config.ProviderScript {
		return Result{Status: OK, Detail: "scripted model " + m.Script}
	}
	if m.Name == "" {
		return Result{Status: Fail, Detail: "no model configured: " + config.ModelNotConfiguredHint}
	}
	return Result{Status: OK, Detail: fmt.Sprintf("%s (from %s)", m.Name, env.Sources.Of("model.name"))}
}

func checkAPIKey(_ context.Context, env *Env) Result {
	if env.ConfigErr != nil {
		return skipNoConfig()
	}
	m := env.Config.Model
	if m.Provider == config.ProviderScript {
		return Result{Status: Skip, Detail: "not needed for a scripted model"}
	}
	if noModel(env) {
		return skipNoModel()
	}
	keyEnvSet := env.Sources.Of("model.apiKeyEnv").Kind != config.SourceDefault
	if m.APIKey == "" && localEndpoint(m.BaseURL) && !keyEnvSet {
		// Ollama, llama.cpp, LM Studio and vLLM on this machine or the LAN
		// take requests without a key, and acpd run sends none then; the
		// endpoint check finds out whether this one does.
		return Result{Status: OK, Detail: fmt.Sprintf("none set, none needed by a local endpoint (%s)", m.BaseURL)}
	}
	if m.APIKeyEnv == "" {
		return Result{Status: Fail, Detail: "model.apiKeyEnv is empty: set it to the environment variable holding the key"}
	}
	if m.APIKey == "" && keyEnvSet {
		// Naming a variable says a key is wanted, even for a local
		// endpoint: an empty one is a mistake, not "none needed".
		return Result{Status: Fail, Detail: fmt.Sprintf("environment variable %s is empty or unset (model.apiKeyEnv names it, %s)", m.APIKeyEnv, env.Sources.Of("model.apiKeyEnv"))}
	}
	if m.APIKey == "" {
		return Result{Status: Fail, Detail: fmt.Sprintf("environment variable %s is empty or unset (model.apiKeyEnv names it; a local endpoint such as Ollama needs none)", m.APIKeyEnv)}
	}
	return Result{Status: OK, Detail: fmt.Sprintf("read from %s (%d characters)", m.APIKeyEnv, len(m.APIKey))}
}

// localEndpoint reports whether baseURL names this machine or a private
// network (localhost, a loopback, private or link-local address), where
// model servers commonly run without keys.
func localEndpoint(baseURL string) bool {
	u, err := url.Parse(baseURL)
	if err != nil {
		return false
	}
	host := strings.ToLower(u.Hostname())
	if host == "localhost" || strings.HasSuffix(host, ".localhost") {
		return true
	}
	ip, err := netip.ParseAddr(host)
	if err != nil {
		return false
	}
	ip = ip.Unmap()
	return ip.IsLoopback() || ip.IsPrivate() || ip.IsLinkLocalUnicast() || ip.IsUnspecified()
}

// checkEndpoint asks [model]'s provider for its model list and looks for
// the configured model in it (probe).
func checkEndpoint(ctx context.Context, env *Env) Result {
	if env.ConfigErr != nil {
		return skipNoConfig()
	}
	m := env.Config.Model
	if m.Provider == config.ProviderScript {
		return Result{Status: Skip, Detail: "a scripted model has no endpoint"}
	}
	if noModel(env) {
		return skipNoModel()
	}
	if len(env.Config.Providers) > 0 && len(env.Config.LegacyModels()) == 0 {
		return Result{Status: Skip, Detail: "[model] serves no model of its own; the providers check covers [modelProviders]"}
	}
	return probe(ctx, env, string(m.Provider), m.BaseURL, m.APIKey, m.APIKeyEnv, m.Name, "model.baseUrl")
}

// checkProviders checks each [modelProviders] entry: its key is set (or
// its endpoint is local) and its endpoint lists its first model.
func checkProviders(ctx context.Context, env *Env) Result {
	if env.ConfigErr != nil {
		return skipNoConfig()
	}
	ps := env.Config.Providers
	if len(ps) == 0 {
		return Result{Status: Skip, Detail: "no [modelProviders] entries"}
	}
	status := OK
	parts := make([]string, 0, len(ps))
	for _, p := range ps {
		var r Result
		switch {
		case p.APIKey == "" && !localEndpoint(p.BaseURL):
			r = Result{Status: Fail, Detail: fmt.Sprintf("environment variable %s is empty or unset", p.APIKeyEnv)}
		default:
			r = probe(ctx, env, p.Protocol, p.BaseURL, p.APIKey, p.APIKeyEnv, p.Models[0].ID, "modelProviders."+p.ID+".baseUrl")
		}
		if r.Status == Fail {
			status = Fail
		}
		parts = append(parts, fmt.Sprintf("%s: %s %s", p.ID, r.Status, r.Detail))
	}
	return Result{Status: status, Detail: strings.Join(parts, "; ")}
}

// probe asks a provider for its model list — GET {base}/models for the
// openai protocol (OpenAI, DashScope, OpenRouter, vLLM, Ollama and llama.cpp
// serve it), {base}/v1/models for anthropic, {base}/v1beta/models for
// gemini (when base names no version), each with its own key header — and looks for mdl in it.
func probe(ctx context.Context, env *Env, protocol, baseURL, key, keyEnv, mdl, field string) Result {
	timeout := env.timeout()
	client := env.HTTP
	if client == nil {
		client = &http.Client{Timeout: timeout}
	}
	// The key goes to the configured origin only (credhttp).
	client = credhttp.Apply(client)
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	base := strings.TrimRight(baseURL, "/")
	url := base + "/models"
	switch protocol {
	case "anthropic":
		if !strings.HasSuffix(base, "/v1") {
			url = base + "/v1/models"
		}
	case "gemini":
		// The same root the requests use: a base that already names its
		// version (…/v1beta, as Google's examples write it) keeps it.
		url = gemini.APIRoot(base) + "/models"
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return Result{Status: Fail, Detail: fmt.Sprintf("%s %q: %v", field, baseURL, err)}
	}
	if key != "" {
		switch protocol {
		case "anthropic":
			req.Header.Set("x-api-key", key)
		case "gemini":
			req.Header.Set("x-goog-api-key", key)
		default:
			req.Header.Set("Authorization", "Bearer "+key)
		}
	}
	if protocol == "anthropic" {
		req.Header.Set("anthropic-version", "2023-06-01")
	}
	resp, err := client.Do(req)
	if err != nil {
		if errors.Is(err, context.DeadlineExceeded) || errors.Is(ctx.Err(), context.DeadlineExceeded) {
			return Result{Status: Fail, Detail: fmt.Sprintf("GET %s: no answer within %v", url, timeout)}
		}
		return Result{Status: Fail, Detail: fmt.Sprintf("GET %s: %v", url, unwrapURLError(err))}
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 4<<20))
	if err != nil {
		return Result{Status: Fail, Detail: fmt.Sprintf("GET %s: reading the answer: %v", url, err)}
	}
	switch {
	case resp.StatusCode == http.StatusUnauthorized || resp.StatusCode == http.StatusForbidden:
		return Result{Status: Fail, Detail: fmt.Sprintf("GET %s: %s: the provider refused the key read from %s (%s)",
			url, resp.Status, keyEnv, emptiness(key))}
	case resp.StatusCode != http.StatusOK:
		return Result{Status: Fail, Detail: fmt.Sprintf("GET %s: %s", url, resp.Status)}
	}
	// OpenAI and Anthropic list {"data": [{"id"}]}, Gemini {"models":
	// [{"name": "models/…"}]}.
	var list struct {
		Data []struct {
			ID string `json:"id"`
		} `json:"data"`
		Models []struct {
			Name string `json:"name"`
		} `json:"models"`
	}
	if err := json.Unmarshal(body, &list); err != nil {
		return Result{Status: Fail, Detail: fmt.Sprintf("GET %s: the answer is not a model list: %v", url, err)}
	}
	ids := make([]string, 0, len(list.Data)+len(list.Models))
	for _, d := range list.Data {
		ids = append(ids, d.ID)
	}
	for _, m := range list.Models {
		ids = append(ids, strings.TrimPrefix(m.Name, "models/"))
	}
	if mdl == "" {
		return Result{Status: OK, Detail: fmt.Sprintf("%s reachable, %d models listed (no model configured to look for)", url, len(ids))}
	}
	if slices.Contains(ids, mdl) {
		return Result{Status: OK, Detail: fmt.Sprintf("%s reachable, model %s listed", url, mdl)}
	}
	return Result{Status: Fail, Detail: fmt.Sprintf("%s reachable, but model %s is not among its %d models: %s", url, mdl, len(ids), offered(ids))}
}

// offeredMax bounds the models a mismatch lists: a router offers hundreds.
const offeredMax = 20

// offered lists the models an endpoint offers, sorted, the first offeredMax
// of them and how many more.
func offered(ids []string) string {
	if len(ids) == 0 {
		return "none"
	}
	ids = slices.Sorted(slices.Values(ids))
	if len(ids) <= offeredMax {
		return strings.Join(ids, ", ")
	}
	return fmt.Sprintf("%s and %d more", strings.Join(ids[:offeredMax], ", "), len(ids)-offeredMax)
}

// emptiness says whether the key acpd sent was empty, for a 401/403.
func emptiness(key string) string {
	if key == "" {
		return "it was empty or unset"
	}
	return "it was not empty"
}

// unwrapURLError drops *url.Error's repetition of method and URL.
func unwrapURLError(err error) error {
	var ue interface{ Unwrap() error }
	if errors.As(err, &ue) {
		if inner := ue.Unwrap(); inner != nil {
			return inner
		}
	}
	return err
}

// checkDataDir makes sure sessions can be written: the folder exists (or
// is created, as acpd would create it) and a file can be created in it.
func checkDataDir(_ context.Context, env *Env) Result {
	if env.ConfigErr != nil {
		return skipNoConfig()
	}
	dir := env.Config.Session.DataDir
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return Result{Status: Fail, Detail: fmt.Sprintf("%s: %v", dir, err)}
	}
	f, err := os.CreateTemp(dir, ".doctor-*")
	if err != nil {
		return Result{Status: Fail, Detail: fmt.Sprintf("%s is not writable: %v", dir, err)}
	}
	name := f.Name()
	_, werr := f.WriteString("acpd doctor\n")
	cerr := f.Close()
	rerr := os.Remove(name)
	if err := errors.Join(werr, cerr, rerr); err != nil {
		return Result{Status: Fail, Detail: fmt.Sprintf("%s: writing %s: %v", dir, filepath.Base(name), err)}
	}
	return Result{Status: OK, Detail: dir + " is writable"}
}

// checkImportedMCP names the MCP servers a session here takes from other
// agents' configurations and where each came from, those left off and
// why; it fails when a configured server cannot be started (an unset
// variable, a command not found, a malformed entry).
func checkImportedMCP(_ context.Context, env *Env) Result {
	if env.ConfigErr != nil {
		return skipNoConfig()
	}
	if len(env.Config.MCP.Import) == 0 {
		return Result{Status: Skip, Detail: "mcp.import is empty: no other agent's MCP servers are read"}
	}
	if env.MCP == nil {
		return Result{Status: Skip, Detail: "not checked"}
	}
	f := env.MCP()
	var parts []string
	for _, s := range f.Servers {
		parts = append(parts, fmt.Sprintf("%s (%s; %s)", s.Name, s.Summary(), s.Origin()))
	}
	detail := "none configured"
	if len(parts) > 0 {
		detail = fmt.Sprintf("%d started in every session here: %s", len(parts), strings.Join(parts, ", "))
	}
	if len(f.Off) > 0 {
		var off []string
		for _, o := range f.Off {
			off = append(off, fmt.Sprintf("%s (%s: %s)", o.Name, o.File, o.Why))
		}
		detail += "; left off: " + strings.Join(off, ", ")
	}
	if len(f.Problems) > 0 {
		return Result{Status: Fail, Detail: detail + "; problems: " + strings.Join(f.Problems, "; ")}
	}
	return Result{Status: OK, Detail: detail}
}
