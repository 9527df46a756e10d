package acptest

import (
	"context"
	"sync"

	sdk "github.com/coder/acp-go-sdk"
)

// SDKClient is an editor built on coder/acp-go-sdk's client side, for
// interop tests: it records session updates and answers permission requests
// with Permission. It offers no fs or terminal (initialize without them).
type SDKClient struct {
	// Permission answers session/request_permission; required when the agent asks.
	Permission func(ctx context.Context, p sdk.RequestPermissionRequest) (sdk.RequestPermissionResponse, error)

	mu      sync.Mutex
	updates []sdk.SessionNotification
}

var _ sdk.Client = (*SDKClient)(nil)

// SessionUpdate records n.
func (c *SDKClient) SessionUpdate(_ context.Context, n sdk.SessionNotification) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.updates = append(c.updates, n)
	return nil
}

// RequestPermission calls Permission.
func (c *SDKClient) RequestPermission(ctx context.Context, p sdk.RequestPermissionRequest) (sdk.RequestPermissionResponse, error) {
	return c.Permission(ctx, p)
}

// ReadTextFile is not offered.
func (c *SDKClient) ReadTextFile(context.Context, sdk.ReadTextFileRequest) (sdk.ReadTextFileResponse, error) {
	return sdk.ReadTextFileResponse{}, sdk.NewMethodNotFound("fs/read_text_file")
}

// WriteTextFile is not offered.
func (c *SDKClient) WriteTextFile(context.Context, sdk.WriteTextFileRequest) (sdk.WriteTextFileResponse, error) {
	return sdk.WriteTextFileResponse{}, sdk.NewMethodNotFound("fs/write_text_file")
}

// CreateTerminal is not offered.
func (c *SDKClient) CreateTerminal(context.Context, sdk.CreateTerminalRequest) (sdk.CreateTerminalResponse, error) {
	return sdk.CreateTerminalResponse{}, sdk.NewMethodNotFound("terminal/create")
}

// KillTerminal is not offered.
func (c *SDKClient) KillTerminal(context.Context, sdk.KillTerminalRequest) (sdk.KillTerminalResponse, error) {
	return sdk.KillTerminalResponse{}, sdk.NewMethodNotFound("terminal/kill")
}

// TerminalOutput is not offered.
func (c *SDKClient) TerminalOutput(context.Context, sdk.TerminalOutputRequest) (sdk.TerminalOutputResponse, error) {
	return sdk.TerminalOutputResponse{}, sdk.NewMethodNotFound("terminal/output")
}

// ReleaseTerminal is not offered.
func (c *SDKClient) ReleaseTerminal(context.Context, sdk.ReleaseTerminalRequest) (sdk.ReleaseTerminalResponse, error) {
	return sdk.ReleaseTerminalResponse{}, sdk.NewMethodNotFound("terminal/release")
}

// WaitForTerminalExit is not offered.
func (c *SDKClient) WaitForTerminalExit(context.Context, sdk.WaitForTerminalExitRequest) (sdk.WaitForTerminalExitResponse, error) {
	return sdk.WaitForTerminalExitResponse{}, sdk.NewMethodNotFound("terminal/wait_for_exit")
}

// Updates returns the updates received so far.
func (c *SDKClient) Updates() []sdk.SessionNotification {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]sdk.SessionNotification(nil), c.updates...)
}

// Text is the agent message text received so far.
func (c *SDKClient) Text() string {
	s := ""
	for _, n := range c.Updates() {
		if u := n.Update.AgentMessageChunk; u != nil && u.Content.Text != nil {
			s += u.Content.Text.Text
		}
	}
	return s
}
