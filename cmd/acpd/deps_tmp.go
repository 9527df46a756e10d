//go:build tools

// Package main pins dependencies that packages of this module are about to
// use while they are being written in parallel; removed once each is imported.
package main

import (
	_ "github.com/BurntSushi/toml"
	_ "github.com/bmatcuk/doublestar/v4"
	_ "github.com/coder/acp-go-sdk"
	_ "github.com/modelcontextprotocol/go-sdk/mcp"
	_ "github.com/santhosh-tekuri/jsonschema/v6"
	_ "github.com/sourcegraph/jsonrpc2"
	_ "github.com/stretchr/testify/require"
)
