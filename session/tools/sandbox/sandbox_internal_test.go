package sandbox

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestProbe_Override(t *testing.T) {
	real := probe("")
	st := probe("0")
	assert.False(t, st.Usable())
	assert.True(t, st.Simulated)
	assert.Equal(t, 0, st.ABI)
	assert.Contains(t, st.Err.Error(), "ACPD_SANDBOX_ABI=0")
	assert.Equal(t, real.KernelABI, st.KernelABI)

	st = probe("2")
	assert.False(t, st.Usable())
	if real.ABI >= 2 {
		assert.Equal(t, 2, st.ABI)
		assert.Contains(t, st.Err.Error(), "needs ABI 3")
	}

	st = probe("99")
	assert.Equal(t, real.ABI, st.ABI, "the override never raises the ABI")
	assert.Equal(t, real.Usable(), st.Usable())

	st = probe("many")
	assert.False(t, st.Usable())
	assert.Contains(t, st.Err.Error(), `ACPD_SANDBOX_ABI="many"`)
}

func TestParseHelperArgs(t *testing.T) {
	h, err := parseHelperArgs([]string{"--status-fd", "3", "--rw", "/a", "--rw", "/b c", "--no-net", "--", "sh", "-c", "echo --rw"})
	require.NoError(t, err)
	assert.Equal(t, helperArgs{statusFD: 3, portFD: -1, rw: []string{"/a", "/b c"}, noNet: true, argv: []string{"sh", "-c", "echo --rw"}}, h)

	h, err = parseHelperArgs([]string{"--serve", "3", "--rw", "/a", "--no-net"})
	require.NoError(t, err)
	assert.Equal(t, helperArgs{statusFD: -1, portFD: -1, serve: true, serveFD: 3, rw: []string{"/a"}, noNet: true}, h)

	h, err = parseHelperArgs([]string{"--deny-port", "8123", "--port-ruleset", "4", "--deny-read", "/r", "--", "sh"})
	require.NoError(t, err)
	assert.Equal(t, []uint16{8123}, h.denyPorts)
	assert.Equal(t, 4, h.portFD)
	assert.Equal(t, []string{"/r"}, h.denyRead)

	for _, bad := range [][]string{
		{"--deny-port", "0", "--", "sh"},
		{"--deny-port", "65536", "--", "sh"},
		{"sh"},
		{"--serve", "x"},
		{"--rw"},
		{"--status-fd", "x", "--", "sh"},
		{"--status-fd", "-1", "--", "sh"},
		{"--bogus", "--", "sh"},
		{"--rw", "/a", "--"},
	} {
		_, err := parseHelperArgs(bad)
		assert.Error(t, err, "%q", bad)
	}
}
