package main

import (
	"context"
	"errors"
	"io"
	"log/slog"

	"github.com/acpd/acpd/config"
)

// serve speaks ACP on stdin/stdout until ctx is cancelled or the client
// disconnects.
func serve(ctx context.Context, cfg config.Config, stdin io.Reader, stdout io.Writer, logger *slog.Logger) error {
	return errors.New("serving is wired by the session host")
}
