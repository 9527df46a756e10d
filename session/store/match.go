package store

import (
	"errors"
	"fmt"
	"strings"
)

// ErrAmbiguousID: a session id prefix that more than one session starts with.
var ErrAmbiguousID = errors.New("session id prefix is ambiguous")

// MatchID finds the session s names among ids: the id equal to s, else the
// one id that starts with s. acpd stats prints ids cut to 12 characters to
// keep its table narrow, so what it prints must be usable wherever an id
// is asked for; a prefix more than one id starts with is an error that
// counts them, and one none starts with is ErrNotFound.
func MatchID(ids []string, s string) (string, error) {
	if err := ValidateID(s); err != nil {
		return "", err
	}
	var found []string
	for _, id := range ids {
		if id == s {
			return id, nil
		}
		if strings.HasPrefix(id, s) {
			found = append(found, id)
		}
	}
	switch len(found) {
	case 0:
		return "", fmt.Errorf("%w: no session id is or starts with %q", ErrNotFound, s)
	case 1:
		return found[0], nil
	}
	return "", fmt.Errorf("%w: %d sessions start with %q (%s, %s…); give more of the id", ErrAmbiguousID, len(found), s, found[0], found[1])
}
