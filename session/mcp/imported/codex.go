package imported

import (
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/BurntSushi/toml"

	"github.com/acpd/acpd/acp"
)

// codexEntry is one [mcp_servers.<name>] table of Codex's config.toml.
type codexEntry struct {
	Command           string            `toml:"command"`
	Args              []string          `toml:"args"`
	Env               map[string]string `toml:"env"`
	EnvVars           []any             `toml:"env_vars"`
	Cwd               string            `toml:"cwd"`
	URL               string            `toml:"url"`
	BearerTokenEnvVar string            `toml:"bearer_token_env_var"`
	HTTPHeaders       map[string]string `toml:"http_headers"`
	EnvHTTPHeaders    map[string]string `toml:"env_http_headers"`
	Enabled           *bool             `toml:"enabled"`
	ToolTimeoutSec    *float64          `toml:"tool_timeout_sec"`
	EnabledTools      []string          `toml:"enabled_tools"`
	DisabledTools     []string          `toml:"disabled_tools"`
}

// CodexConfig reads the MCP servers of a Codex config.toml
// ([mcp_servers.<name>]): command, args, env, cwd; url (Streamable HTTP,
// the only HTTP transport Codex speaks), http_headers; the variables it
// names — env_vars (passed through from acpd's environment, empty when
// unset), bearer_token_env_var (an Authorization: Bearer header),
// env_http_headers — as ${VAR} references Expand fills; enabled = false,
// tool_timeout_sec, enabled_tools and disabled_tools.
func CodexConfig(data []byte, file string, scope Scope) (Found, error) {
	var raw struct {
		MCPServers map[string]toml.Primitive `toml:"mcp_servers"`
	}
	md, err := toml.Decode(string(data), &raw)
	if err != nil {
		return Found{}, fmt.Errorf("%s: %v", file, err)
	}
	return collect(slices.Sorted(maps.Keys(raw.MCPServers)), scope, file, func(name string) (Server, string, error) {
		var e codexEntry
		if err := md.PrimitiveDecode(raw.MCPServers[name], &e); err != nil {
			return Server{}, "", err
		}
		if e.Enabled != nil && !*e.Enabled {
			return Server{}, "enabled = false", nil
		}
		s, err := codexServer(name, e)
		return s, "", err
	}), nil
}

func codexServer(name string, e codexEntry) (Server, error) {
	s := Server{MCPServer: acp.MCPServer{Name: name}, Agent: Codex, Dir: e.Cwd,
		IncludeTools: e.EnabledTools, ExcludeTools: e.DisabledTools}
	switch {
	case e.Command != "" && e.URL != "":
		return s, fmt.Errorf("both a command and a url")
	case e.Command != "":
		s.Command, s.Args = e.Command, e.Args
		for _, k := range slices.Sorted(maps.Keys(e.Env)) {
			s.Env = append(s.Env, acp.EnvVariable{Name: k, Value: e.Env[k]})
		}
		for _, v := range e.EnvVars {
			n := ""
			switch x := v.(type) {
			case string:
				n = x
			case map[string]any:
				n, _ = x["name"].(string)
			}
			if !validName(n) {
				return s, fmt.Errorf("env_vars: %v is not a variable name", v)
			}
			s.Env = append(s.Env, acp.EnvVariable{Name: n, Value: "${" + n + ":-}"})
		}
	case e.URL != "":
		s.Type, s.URL = "http", e.URL
		for _, k := range slices.Sorted(maps.Keys(e.HTTPHeaders)) {
			s.Headers = append(s.Headers, acp.HTTPHeader{Name: k, Value: e.HTTPHeaders[k]})
		}
		for _, k := range slices.Sorted(maps.Keys(e.EnvHTTPHeaders)) {
			if !validName(e.EnvHTTPHeaders[k]) {
				return s, fmt.Errorf("env_http_headers.%s: %q is not a variable name", k, e.EnvHTTPHeaders[k])
			}
			s.Headers = append(s.Headers, acp.HTTPHeader{Name: k, Value: "${" + e.EnvHTTPHeaders[k] + "}"})
		}
		if v := e.BearerTokenEnvVar; v != "" {
			if !validName(v) {
				return s, fmt.Errorf("bearer_token_env_var: %q is not a variable name", v)
			}
			s.Headers = append(s.Headers, acp.HTTPHeader{Name: "Authorization", Value: "Bearer ${" + v + "}"})
		}
	default:
		return s, fmt.Errorf("neither a command nor a url")
	}
	if e.ToolTimeoutSec != nil && *e.ToolTimeoutSec > 0 {
		s.Timeout = time.Duration(*e.ToolTimeoutSec * float64(time.Second))
	}
	return s, nil
}
