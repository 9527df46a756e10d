package acp

import "context"

// Agent is what the connection dispatches client requests to. It is
// implemented by session.Manager. Every method except Cancel (and the first
// Initialize) runs on its own goroutine with a context that is cancelled by
// `$/cancel_request` for that request or when the connection ends. Methods
// return *Error (see errors.go) for protocol errors; any other error is
// answered as -32603.
type Agent interface {
	// Initialize answers initialize. A connection's first one runs inline
	// on the read loop, and its answer is written before the next message
	// is read: the editor waits for this answer at every agent start, and
	// handing it to a goroutine of its own put a thread wake-up (often a
	// thread start) between request and answer. It must return promptly
	// and must not call the Client.
	Initialize(ctx context.Context, req *InitializeRequest) (*InitializeResponse, error)
	Authenticate(ctx context.Context, req *AuthenticateRequest) (*Empty, error)
	NewSession(ctx context.Context, req *NewSessionRequest) (*NewSessionResponse, error)
	LoadSession(ctx context.Context, req *LoadSessionRequest) (*LoadSessionResponse, error)
	ResumeSession(ctx context.Context, req *ResumeSessionRequest) (*LoadSessionResponse, error)
	ListSessions(ctx context.Context, req *ListSessionsRequest) (*ListSessionsResponse, error)
	CloseSession(ctx context.Context, req *SessionIDRequest) (*Empty, error)
	DeleteSession(ctx context.Context, req *SessionIDRequest) (*Empty, error)
	SetSessionMode(ctx context.Context, req *SetSessionModeRequest) (*Empty, error)
	SetSessionConfigOption(ctx context.Context, req *SetSessionConfigOptionRequest) (*SetSessionConfigOptionResponse, error)
	// Prompt runs one turn. All session/update notifications of the turn are
	// sent before it returns, so they reach the wire before the response.
	Prompt(ctx context.Context, req *PromptRequest) (*PromptResponse, error)
	// Cancel handles the session/cancel notification. It runs inline on the
	// read loop and must not block.
	Cancel(req *SessionIDRequest)
}

// Client is the editor side, as seen from a turn: notifications and requests
// the agent sends. *Conn implements it. Calls honour ctx: when ctx is done
// while a request is outstanding, `$/cancel_request` is sent for it and the
// call returns ctx's error. Call only from goroutines other than the read
// loop (turn goroutines), never from Agent.Cancel.
type Client interface {
	SessionUpdate(ctx context.Context, n *SessionNotification) error
	RequestPermission(ctx context.Context, req *RequestPermissionRequest) (*RequestPermissionResponse, error)
	ReadTextFile(ctx context.Context, req *ReadTextFileRequest) (*ReadTextFileResponse, error)
	WriteTextFile(ctx context.Context, req *WriteTextFileRequest) error
	CreateTerminal(ctx context.Context, req *CreateTerminalRequest) (*CreateTerminalResponse, error)
	TerminalOutput(ctx context.Context, req *TerminalRequest) (*TerminalOutputResponse, error)
	WaitForTerminalExit(ctx context.Context, req *TerminalRequest) (*TerminalExitStatus, error)
	KillTerminal(ctx context.Context, req *TerminalRequest) error
	ReleaseTerminal(ctx context.Context, req *TerminalRequest) error
}
