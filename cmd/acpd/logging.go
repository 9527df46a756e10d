package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"golang.org/x/term"

	"github.com/acpd/acpd/config"
)

// newLogger builds the process's one logger. It never writes to stdout,
// which carries the protocol. Logs go to cfg.File when set (JSON), else to
// stderr: text for a person at a terminal, JSON for everything else.
// The returned close func flushes and closes the log file, if any.
func newLogger(cfg config.LogConfig, stderr io.Writer) (*slog.Logger, func() error, error) {
	level := cfg.SlogLevel()
	if cfg.Trace {
		// Traced messages are logged at debug level; tracing without them
		// would print nothing.
		level = min(level, slog.LevelDebug)
	}
	opts := &slog.HandlerOptions{Level: level}
	if cfg.File != "" {
		if err := os.MkdirAll(filepath.Dir(cfg.File), 0o755); err != nil {
			return nil, nil, fmt.Errorf("open log file: %w", err)
		}
		f, err := os.OpenFile(cfg.File, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
		if err != nil {
			return nil, nil, fmt.Errorf("open log file: %w", err)
		}
		return slog.New(slog.NewJSONHandler(f, opts)), f.Close, nil
	}
	noop := func() error { return nil }
	if isTerminal(stderr) {
		return slog.New(slog.NewTextHandler(stderr, opts)), noop, nil
	}
	return slog.New(slog.NewJSONHandler(stderr, opts)), noop, nil
}

// openLog is newLogger for the subcommand prog ("acpd run"), which exits
// with exitUsage when ok is false; failures are reported on stderr as prog's.
func openLog(cfg config.LogConfig, stderr io.Writer, prog string) (logger *slog.Logger, close func(), ok bool) {
	logger, closeLog, err := newLogger(cfg, stderr)
	if err != nil {
		fmt.Fprintf(stderr, "%s: %v\n", prog, err)
		return nil, nil, false
	}
	return logger, func() {
		if err := closeLog(); err != nil {
			fmt.Fprintf(stderr, "%s: close log file: %v\n", prog, err)
		}
	}, true
}

// isTerminal reports whether stream (a reader or a writer) is a terminal;
// /dev/null, a character device too, is not.
func isTerminal(stream any) bool {
	f, ok := stream.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}

// logInfo is logger.Info without the caller's program counter, for the
// lines logged before acpd answers initialize. slog's Logger methods record
// it for every line (runtime.Callers walks the stack) whether or not the
// handler prints the source, and newLogger's handlers do not; the first
// walk of a process reads the binary's unwinding tables, about half of the
// 0.5 ms the first line took on a small VM.
func logInfo(logger *slog.Logger, msg string, args ...any) {
	ctx := context.Background()
	if !logger.Enabled(ctx, slog.LevelInfo) {
		return
	}
	r := slog.NewRecord(time.Now(), slog.LevelInfo, msg, 0)
	r.Add(args...)
	_ = logger.Handler().Handle(ctx, r)
}
