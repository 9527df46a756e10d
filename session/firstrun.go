package session

import (
	"errors"
	"fmt"
	"net/http"

	"github.com/acpd/acpd/acp"
	"github.com/acpd/acpd/config"
	"github.com/acpd/acpd/session/model"
)

// errModelNotConfigured answers a prompt in a session without a model name
// (a first run without configuration). session/new works without one, so an
// editor can open the agent and show this message on the first prompt.
//
// Decision: -32603 with data.errorKind "model_not_configured", not ACP's
// auth_required (-32000): editors answer -32000 by offering the agent's
// auth methods, and acpd's one method (an API key in the environment)
// cannot choose a model. `acpd run` exits 2 (a configuration error) on it.
func errModelNotConfigured() error {
	return &acp.Error{
		Code:    acp.CodeInternalError,
		Message: "No model is configured: " + config.ModelNotConfiguredHint + ". `acpd doctor` checks the whole setup.",
		Data:    map[string]any{"errorKind": ErrorKindModelNotConfigured},
	}
}

// Error kinds of prompt errors' data, for clients that act on them.
const (
	ErrorKindModelNotConfigured = "model_not_configured"
	ErrorKindProviderAuth       = "provider_auth_failed"
)

// modelError is the prompt's answer when the model request failed. A 401
// or 403 names the environment variable the key was read from and whether
// it was empty, the two things a user has to check.
func (s *Session) modelError(err error) error {
	var ae *model.APIError
	env := s.m.opts.APIKeyEnv
	if env == "" || !errors.As(err, &ae) || (ae.Status != http.StatusUnauthorized && ae.Status != http.StatusForbidden) {
		return acp.ErrInternal(err.Error())
	}
	state := "was set"
	if s.m.opts.APIKeyEmpty {
		state = "is empty or unset, so the request carried no key"
	}
	return &acp.Error{
		Code: acp.CodeInternalError,
		Message: fmt.Sprintf("the model provider refused the request (HTTP %d: %s); the API key is read from the environment variable %s, which %s",
			ae.Status, ae.Message, env, state),
		Data: map[string]any{"errorKind": ErrorKindProviderAuth, "status": ae.Status, "apiKeyEnv": env, "apiKeyEmpty": s.m.opts.APIKeyEmpty},
	}
}
