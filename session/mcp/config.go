package mcp

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"

	"github.com/acpd/acpd/acp"
)

// maxConfigSize bounds an MCP configuration file.
const maxConfigSize = 1 << 20

// LoadConfig reads MCP servers from a JSON file in the format other agents
// take (Claude Code's --mcp-config, .mcp.json):
//
//	{"mcpServers": {
//	  "files": {"command": "npx", "args": ["-y", "…"], "env": {"K": "V"}},
//	  "docs":  {"type": "http", "url": "https://…", "headers": {"K": "V"}}}}
//
// It is how `acpd run` and `acpd mcp login` get servers, where no editor
// gives them. A command without a slash is looked up in PATH now (never in
// the working directory); a relative command with one is refused, since a
// server runs in /. The servers are returned by name and checked as
// session/new's are (ValidateServers).
func LoadConfig(path string) ([]acp.MCPServer, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var buf bytes.Buffer
	if n, err := buf.ReadFrom(io.LimitReader(f, maxConfigSize+1)); err != nil {
		return nil, err
	} else if n > maxConfigSize {
		return nil, fmt.Errorf("%s: larger than %d KiB", path, maxConfigSize>>10)
	}
	var file struct {
		MCPServers map[string]struct {
			Type    string            `json:"type"`
			Command string            `json:"command"`
			Args    []string          `json:"args"`
			Env     map[string]string `json:"env"`
			URL     string            `json:"url"`
			Headers map[string]string `json:"headers"`
		} `json:"mcpServers"`
	}
	dec := json.NewDecoder(&buf)
	dec.DisallowUnknownFields()
	if err := dec.Decode(&file); err != nil {
		return nil, fmt.Errorf("%s: %v", path, err)
	}
	if file.MCPServers == nil {
		return nil, fmt.Errorf("%s: no \"mcpServers\" object", path)
	}
	var out []acp.MCPServer
	for name, s := range file.MCPServers {
		srv := acp.MCPServer{Name: name, Type: s.Type, URL: s.URL, Args: s.Args}
		if srv.Type == "stdio" {
			srv.Type = TypeStdio
		}
		if srv.Type == TypeStdio && s.Command != "" {
			cmd, err := command(s.Command)
			if err != nil {
				return nil, fmt.Errorf("%s: mcp server %q: %v", path, name, err)
			}
			srv.Command = cmd
		}
		for _, k := range sortedKeys(s.Env) {
			srv.Env = append(srv.Env, acp.EnvVariable{Name: k, Value: s.Env[k]})
		}
		for _, k := range sortedKeys(s.Headers) {
			srv.Headers = append(srv.Headers, acp.HTTPHeader{Name: k, Value: s.Headers[k]})
		}
		out = append(out, srv)
	}
	slices.SortFunc(out, func(a, b acp.MCPServer) int { return strings.Compare(a.Name, b.Name) })
	if err := ValidateServers(out); err != nil {
		return nil, fmt.Errorf("%s: %v", path, err)
	}
	return out, nil
}

// command is a configured command as an absolute path.
func command(c string) (string, error) {
	if filepath.IsAbs(c) {
		return c, nil
	}
	if strings.ContainsRune(c, '/') || strings.ContainsRune(c, filepath.Separator) {
		return "", fmt.Errorf("command %q is relative; give an absolute path or a name found in PATH", c)
	}
	p, err := exec.LookPath(c)
	if err != nil {
		return "", err
	}
	return filepath.Abs(p)
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
