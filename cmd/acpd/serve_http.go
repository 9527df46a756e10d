package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/acpd/acpd/config"
	"github.com/acpd/acpd/session/server"
	"github.com/acpd/acpd/session/store"
)

var _ = addCommand(func(a *app) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "serve --listen ADDR [flags]",
		Short: "serve ACP over HTTP and WebSocket (--listen ADDR) to editors on another machine or in a container",
		Long:  serveHelp,
		Args:  cobra.ArbitraryArgs,
	}
	cmd.Annotations = map[string]string{"usage": "acpd serve --listen ADDR [--tls-cert FILE --tls-key FILE] [flags]\n  acpd serve --init-token [FILE]"}
	cmd.Flags().Bool("init-token", false, "write a new bearer token to FILE (default: server.tokenFile, else <dataDir>/server.token), readable by you only, print it once and exit")
	addConfigFlags(cmd.Flags(), slices.Concat(groupAgent, []config.FlagGroup{config.GroupServer})...)
	cmd.RunE = a.action(cmdServeHTTP)
	return cmd
})

const serveHelp = `Serves the Agent Client Protocol over Streamable HTTP and WebSocket at
http(s)://ADDR/acp, one ACP connection per client, each with the sessions it
opens. Every request must carry "Authorization: Bearer TOKEN", the token read
from server.tokenEnv's variable or the token file. Without TLS only loopback
addresses are served (reach them through an SSH tunnel). Once listening, the
endpoint's URL is printed on stderr.`

func cmdServeHTTP(ctx context.Context, a *app) int {
	if init, _ := a.flags.GetBool("init-token"); init {
		return initToken(a)
	}
	if len(a.args) > 0 {
		return a.badUsage(fmt.Sprintf("unexpected argument %q", a.args[0]))
	}
	if a.cfg.Server.Listen == "" {
		fmt.Fprintln(a.stderr, "acpd serve: no address to listen on: give --listen HOST:PORT (e.g. 127.0.0.1:8123) or set [server] listen")
		return exitUsage
	}
	// The address rule first: a refused address is refused before anything
	// is opened.
	if err := server.CheckAddress(a.cfg.Server.Listen, a.cfg.Server.TLSCert != ""); err != nil {
		fmt.Fprintf(a.stderr, "acpd serve: %v\n", err)
		return exitUsage
	}
	token, err := server.LoadToken(a.cfg, a.deps.getenv)
	if err != nil {
		fmt.Fprintf(a.stderr, "acpd serve: %v\n", err)
		return exitUsage
	}
	logger, closeLog, ok := openLog(a.cfg.Log, a.stderr, "acpd serve")
	if !ok {
		return exitUsage
	}
	defer closeLog()
	if env, file := server.TokenSource(a.cfg); env != "" {
		// Read once: no program acpd starts unconfined (an MCP server, git,
		// a hook) inherits the token, so no confined command finds it in
		// such a process's /proc/PID/environ, which Landlock leaves readable.
		_ = os.Unsetenv(env)
	} else {
		if fi, err := os.Stat(file); err == nil && fi.Mode().Perm()&0o077 != 0 {
			logger.Warn("the token file can be read by other users; chmod 600 it", "file", file, "mode", fi.Mode().Perm().String())
		}
	}

	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	opts, err := sessionOptions(a.cfg, logger)
	if err != nil {
		return serveFailed(a, err)
	}
	st, err := store.Open(a.cfg.Session.DataDir, store.Options{Logger: logger, IndexInBackground: true})
	if err != nil {
		return serveFailed(a, err)
	}
	opts.Store = st
	tel, stopTel, err := startTelemetry(ctx, a.cfg, logger)
	if err != nil {
		return serveFailed(a, err)
	}
	defer stopTel()
	opts.Telemetry = tel

	srv, err := server.New(server.Options{Config: a.cfg.Server, Token: token, Session: opts,
		Trace: a.cfg.Log.Trace, Logger: logger, Version: versionString()})
	if err == nil {
		err = srv.Listen()
	}
	if err != nil {
		return serveFailed(a, err)
	}
	if tcp, ok := srv.Addr().(*net.TCPAddr); ok {
		// The shell sandbox's commands may not connect to this port: with
		// the network open, acpd's own API is the one server on this
		// machine that holds more authority than they do.
		opts.Sandbox.DenyConnect(uint16(tcp.Port))
	}
	logger.Info("acpd starting", "version", versionString(), "pid", os.Getpid(),
		"model", a.cfg.Model.Name, "provider", a.cfg.Model.Provider)
	// Said on stderr whatever the log's destination: a test or a script
	// that asked for port 0 learns the port here.
	fmt.Fprintf(a.stderr, "acpd: serving ACP on %s\n", srv.URL())
	if err := srv.Serve(ctx); err != nil {
		return serveFailed(a, err)
	}
	logger.Info("acpd stopped")
	return exitOK
}

func serveFailed(a *app, err error) int {
	fmt.Fprintf(a.stderr, "acpd serve: %v\n", err)
	return exitError
}

// initToken is `acpd serve --init-token [FILE]`.
func initToken(a *app) int {
	if len(a.args) > 1 {
		return a.badUsage(fmt.Sprintf("--init-token: unexpected argument %q", a.args[1]))
	}
	path := server.TokenFile(a.cfg)
	if len(a.args) == 1 {
		p, err := filepath.Abs(a.args[0])
		if err != nil {
			fmt.Fprintf(a.stderr, "acpd serve --init-token: %v\n", err)
			return exitUsage
		}
		path = p
	}
	tok, err := server.WriteTokenFile(path)
	if err != nil {
		fmt.Fprintf(a.stderr, "acpd serve --init-token: %v\n", err)
		if errors.Is(err, os.ErrExist) {
			return exitUsage
		}
		return exitError
	}
	fmt.Fprintln(a.stdout, tok)
	fmt.Fprintf(a.stderr, "acpd: wrote a new token to %s (mode 0600); clients send it as \"Authorization: Bearer <token>\". It is not shown again.\n", path)
	if len(a.args) == 1 && a.cfg.Server.TokenFile != path && a.cfg.Server.TokenEnv == "" {
		fmt.Fprintf(a.stderr, "acpd: serve reads it with --token-file %s (or [server] tokenFile)\n", path)
	}
	return exitOK
}
