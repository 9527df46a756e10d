package acp

import "fmt"

// JSON-RPC and ACP error codes (schema ErrorCode).
const (
	CodeParseError       = -32700
	CodeInvalidRequest   = -32600
	CodeMethodNotFound   = -32601
	CodeInvalidParams    = -32602
	CodeInternalError    = -32603
	CodeRequestCancelled = -32800
	CodeAuthRequired     = -32000
	CodeResourceNotFound = -32002
)

// Error is a JSON-RPC error with optional data. Agent methods return it to
// choose the code; the connection finds it with errors.As.
type Error struct {
	Code    int    `json:"code"`
	Message string `json:"message"`
	Data    any    `json:"data,omitempty"`
}

func (e *Error) Error() string {
	return fmt.Sprintf("jsonrpc error %d: %s", e.Code, e.Message)
}

// ErrParse answers a line that is not JSON.
func ErrParse(detail string) *Error {
	return &Error{Code: CodeParseError, Message: "Parse error", Data: map[string]any{"error": detail}}
}

// ErrInvalidRequest answers a message that is not a valid JSON-RPC request.
func ErrInvalidRequest(detail string) *Error {
	return &Error{Code: CodeInvalidRequest, Message: "Invalid request", Data: map[string]any{"error": detail}}
}

// ErrMethodNotFound answers an unknown or unadvertised method.
func ErrMethodNotFound(method string) *Error {
	return &Error{Code: CodeMethodNotFound, Message: "Method not found", Data: map[string]any{"method": method}}
}

// ErrInvalidParams names the offending field in data and message.
func ErrInvalidParams(field, msg string) *Error {
	return &Error{Code: CodeInvalidParams, Message: msg, Data: map[string]any{"field": field}}
}

// ErrInternal is -32603 with msg as the message.
func ErrInternal(msg string) *Error {
	return &Error{Code: CodeInternalError, Message: msg}
}

// ErrAuthRequired answers operations that need authentication first.
func ErrAuthRequired() *Error {
	return &Error{Code: CodeAuthRequired, Message: "Authentication required"}
}

// ErrResourceNotFound names the missing resource (a session, a file) as uri.
func ErrResourceNotFound(uri string) *Error {
	return &Error{Code: CodeResourceNotFound, Message: "Resource not found: " + uri, Data: map[string]any{"uri": uri}}
}
