// Command mcpserver is the MCP server of the session/mcp tests (package
// mcptest) on stdio.
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/acpd/acpd/session/mcp/mcptest"
)

func main() {
	pageSize := flag.Int("page-size", 0, "listing page size (0: SDK default)")
	flag.Parse()
	// stderr goes to the client's logger; prove it is not mixed into stdout.
	fmt.Fprintln(os.Stderr, "mcpserver starting")
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	if err := mcptest.NewServer(*pageSize, logger).Run(context.Background(), &mcp.StdioTransport{}); err != nil {
		fmt.Fprintln(os.Stderr, "mcpserver:", err)
		os.Exit(1)
	}
}
