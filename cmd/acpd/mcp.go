package main

import (
	"bufio"
	"context"
	"fmt"
	"net/url"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"github.com/acpd/acpd/acp"
	"github.com/acpd/acpd/session/mcp"
	"github.com/acpd/acpd/session/mcp/oauth"
)

var _ = addCommand(func(a *app) *cobra.Command {
	var cfgFile string
	cmd := &cobra.Command{
		Use:   "mcp",
		Short: "sign in to and out of MCP servers that use OAuth",
		Long: `Signs in to HTTP MCP servers that ask for OAuth, from a terminal. Editors do
not need it: acpd shows the sign-in page in the editor when a session starts.
It is for acpd run and for editors that cannot show a page.

A SERVER is the server's URL, or its name in the file given with
--mcp-config (the {"mcpServers": …} JSON other agents take). The tokens are
kept per authorization server in session.dataDir/mcp-oauth, readable by you
alone, and refreshed when they expire; every session of every editor uses
them.`,
		Args: noArgs,
	}
	lookup := func(arg string) (name, serverURL string, err error) {
		if u, perr := url.Parse(arg); perr == nil && (u.Scheme == "http" || u.Scheme == "https") && u.Host != "" {
			return u.Host, arg, nil
		}
		if cfgFile == "" {
			return "", "", &usageError{msg: fmt.Sprintf("%q is not an http(s) URL; give the server's URL, or its name with --mcp-config FILE", arg)}
		}
		servers, err := mcp.LoadConfig(cfgFile)
		if err != nil {
			return "", "", fmt.Errorf("--mcp-config: %v", err)
		}
		for _, s := range servers {
			if s.Name == arg {
				if s.Type != mcp.TypeHTTP {
					return "", "", fmt.Errorf("mcp server %q is not an HTTP server (type %q): only HTTP servers sign in with OAuth", arg, typeOr(s))
				}
				return s.Name, s.URL, nil
			}
		}
		return "", "", fmt.Errorf("--mcp-config %s has no server %q", cfgFile, arg)
	}
	store := func() *oauth.Store { return oauth.NewStore(mcpTokenDir(a)) }
	fail := func(verb string, err error) int {
		if u, ok := err.(*usageError); ok {
			return a.badUsage(u.msg)
		}
		fmt.Fprintf(a.stderr, "acpd mcp %s: %v\n", verb, err)
		return exitError
	}

	login := &cobra.Command{
		Use:   "login SERVER",
		Short: "sign in to an MCP server: open the page shown, then wait or paste the address the browser lands on",
		Args:  cobra.ExactArgs(1),
	}
	login.RunE = func(c *cobra.Command, args []string) error {
		return a.action(func(ctx context.Context, a *app) int {
			name, u, err := lookup(args[0])
			if err != nil {
				return fail("login", err)
			}
			h := oauth.NewHandler(name, u, store(), nil, nil)
			if err := h.SignIn(ctx, nil, terminalPrompt(a)); err != nil {
				return fail("login", err)
			}
			if !h.SignedIn() {
				fmt.Fprintf(a.stderr, "acpd mcp login: %s does not ask for a sign-in\n", u)
				return exitOK
			}
			fmt.Fprintf(a.stderr, "acpd mcp login: signed in to %s\n", u)
			return exitOK
		})(c, args)
	}
	logout := &cobra.Command{
		Use:   "logout SERVER",
		Short: "forget the tokens of an MCP server",
		Args:  cobra.ExactArgs(1),
	}
	logout.RunE = func(c *cobra.Command, args []string) error {
		return a.action(func(ctx context.Context, a *app) int {
			name, u, err := lookup(args[0])
			if err != nil {
				return fail("logout", err)
			}
			gone, err := oauth.NewHandler(name, u, store(), nil, nil).SignOut()
			if err != nil {
				return fail("logout", err)
			}
			if gone {
				fmt.Fprintf(a.stderr, "acpd mcp logout: signed out of %s\n", u)
			} else {
				fmt.Fprintf(a.stderr, "acpd mcp logout: not signed in to %s\n", u)
			}
			return exitOK
		})(c, args)
	}
	for _, sub := range []*cobra.Command{login, logout} {
		sub.Flags().StringVar(&cfgFile, "mcp-config", "", "find SERVER by name in this JSON `file` ({\"mcpServers\": …})")
		_ = sub.MarkFlagFilename("mcp-config", "json")
		cmd.AddCommand(sub)
	}
	return cmd
})

func typeOr(s acp.MCPServer) string {
	if s.Type == "" {
		return "stdio"
	}
	return s.Type
}

// mcpTokenDir is where MCP servers' OAuth grants are kept.
func mcpTokenDir(a *app) string { return filepath.Join(a.cfg.Session.DataDir, "mcp-oauth") }

// terminalPrompt shows the page on stderr and takes a pasted line on
// stdin, while the loopback listener waits for a browser on this machine.
func terminalPrompt(a *app) oauth.Prompt {
	return func(ctx context.Context, p *oauth.Page) (string, error) {
		fmt.Fprintf(a.stderr, "To sign in to MCP server %s, open this page in a browser:\n\n  %s\n\n"+
			"Waiting for the browser to come back to %s.\nIf it cannot (the browser is on another machine), paste here the address it ends on, or its code:\n",
			p.Server, p.URL, p.RedirectURL)
		lines := make(chan string, 1)
		go func() {
			s := bufio.NewScanner(a.stdin)
			s.Buffer(make([]byte, 0, 4096), 64<<10)
			for s.Scan() {
				if t := strings.TrimSpace(s.Text()); t != "" {
					lines <- t
					return
				}
			}
		}()
		select {
		case l := <-lines:
			return l, nil
		case <-p.Done:
			return "", nil
		case <-ctx.Done():
			return "", ctx.Err()
		}
	}
}
