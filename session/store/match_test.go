package store

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestMatchID(t *testing.T) {
	ids := []string{"ABCDEFGHIJKLMNOPQRSTUVWXYZ", "ABCDEFGHIJKLZZZZZZZZZZZZZZ", "ABCDEFGHIJKL", "Q7PWM2K4XRNB3VHT6CJD5YFAEG"}
	for s, want := range map[string]string{
		"Q7PWM2K4XRNB3VHT6CJD5YFAEG": "Q7PWM2K4XRNB3VHT6CJD5YFAEG", // a full id
		"Q7PWM2K4XRNB":               "Q7PWM2K4XRNB3VHT6CJD5YFAEG", // as acpd stats prints it
		"Q":                          "Q7PWM2K4XRNB3VHT6CJD5YFAEG",
		"ABCDEFGHIJKL":               "ABCDEFGHIJKL", // an exact id wins over longer ones it starts
		"ABCDEFGHIJKLM":              "ABCDEFGHIJKLMNOPQRSTUVWXYZ",
	} {
		got, err := MatchID(ids, s)
		require.NoError(t, err, s)
		assert.Equal(t, want, got, s)
	}
	_, err := MatchID(ids, "ABCDEFGHIJK")
	assert.ErrorIs(t, err, ErrAmbiguousID)
	assert.Contains(t, err.Error(), `3 sessions start with "ABCDEFGHIJK"`)
	_, err = MatchID(ids, "NOPE")
	assert.ErrorIs(t, err, ErrNotFound)
	_, err = MatchID(ids, "../x")
	assert.ErrorIs(t, err, ErrInvalidID)
}
