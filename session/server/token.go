package server

import (
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/acpd/acpd/config"
)

// MinTokenLen is the shortest token accepted: anything shorter could be
// guessed, rate limit or not. Generated tokens are 43 characters (256 bits).
const MinTokenLen = 16

// TokenSource says where the token is read from: the variable named by
// server.tokenEnv when set, else server.tokenFile, else the default file
// under the data folder.
func TokenSource(cfg config.Config) (envName, file string) {
	if cfg.Server.TokenEnv != "" {
		return cfg.Server.TokenEnv, ""
	}
	return "", TokenFile(cfg)
}

// TokenFile is the token file serve reads and --init-token writes by
// default.
func TokenFile(cfg config.Config) string {
	if cfg.Server.TokenFile != "" {
		return cfg.Server.TokenFile
	}
	return filepath.Join(cfg.Session.DataDir, config.DefaultTokenFile)
}

// LoadToken reads the token from where TokenSource says. Errors name the
// variable or file and what to do, never the token.
func LoadToken(cfg config.Config, getenv func(string) string) ([]byte, error) {
	env, file := TokenSource(cfg)
	if env != "" {
		t := strings.TrimSpace(getenv(env))
		if t == "" {
			return nil, fmt.Errorf("server.tokenEnv names %s, which is empty: set it to the token clients send", env)
		}
		if len(t) < MinTokenLen {
			return nil, fmt.Errorf("the token in %s is shorter than %d characters; use a longer one (acpd serve --init-token generates one)", env, MinTokenLen)
		}
		return []byte(t), nil
	}
	b, err := os.ReadFile(file)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("no token file %s: create one with `acpd serve --init-token`, or name one with --token-file or server.tokenEnv", file)
	}
	if err != nil {
		return nil, fmt.Errorf("read token file: %w", err)
	}
	t := strings.TrimSpace(string(b))
	if len(t) < MinTokenLen {
		return nil, fmt.Errorf("token file %s holds fewer than %d characters; write a longer token (acpd serve --init-token generates one)", file, MinTokenLen)
	}
	return []byte(t), nil
}

// NewToken returns a fresh random token: 32 bytes, base64url.
func NewToken() string {
	b := make([]byte, 32)
	_, _ = rand.Read(b) // crypto/rand.Read never fails on supported platforms
	return base64.RawURLEncoding.EncodeToString(b)
}

// WriteTokenFile writes a new token to path, readable by its owner only.
// It never replaces a file: an existing token may be in use by clients.
func WriteTokenFile(path string) (string, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return "", fmt.Errorf("create the token's folder: %w", err)
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if errors.Is(err, fs.ErrExist) {
		return "", fmt.Errorf("%s: %w; remove it first to replace the token (clients using it will be refused)", path, fs.ErrExist)
	}
	if err != nil {
		return "", fmt.Errorf("create token file: %w", err)
	}
	tok := NewToken()
	_, werr := f.WriteString(tok + "\n")
	if err := errors.Join(werr, f.Sync(), f.Close()); err != nil {
		_ = os.Remove(path)
		return "", fmt.Errorf("write token file: %w", err)
	}
	return tok, nil
}

// tokenCheck compares presented tokens with the configured one in constant
// time: both sides are hashed first, since ConstantTimeCompare returns at
// once on unequal lengths and would tell a guesser the token's length.
type tokenCheck struct{ digest [sha256.Size]byte }

func newTokenCheck(token []byte) *tokenCheck {
	return &tokenCheck{digest: sha256.Sum256(token)}
}

func (t *tokenCheck) ok(presented string) bool {
	d := sha256.Sum256([]byte(presented))
	return subtle.ConstantTimeCompare(d[:], t.digest[:]) == 1
}
