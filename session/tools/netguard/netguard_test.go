package netguard

import (
	"net/netip"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestBlockedAddr(t *testing.T) {
	for _, s := range []string{"169.254.169.254", "169.254.0.1", "fe80::abcd", "fd00:ec2::254", "::ffff:169.254.169.254", "100.100.100.200", "fe80::1%eth0"} {
		assert.True(t, BlockedAddr(netip.MustParseAddr(s)), s)
	}
	for _, s := range []string{"127.0.0.1", "::1", "10.0.0.1", "8.8.8.8", "fd00:ec2::253", "2001:db8::1"} {
		assert.False(t, BlockedAddr(netip.MustParseAddr(s)), s)
	}
}

func TestPrivateKind(t *testing.T) {
	for s, kind := range map[string]string{
		"127.0.0.1": "loopback", "127.255.0.9": "loopback", "::1": "loopback", "::ffff:127.0.0.1": "loopback",
		"0.0.0.0": "this machine", "::": "this machine",
		"10.0.0.1": "private network", "172.16.0.1": "private network", "172.31.255.255": "private network",
		"192.168.0.1": "private network", "fc00::1": "private network", "fd12:3456::1": "private network",
		"fec0::1": "private network", "64:ff9b::10.0.0.1": "private network", "::ffff:10.0.0.1": "private network",
		"100.64.0.1": "shared (carrier-grade NAT) network", "100.127.255.254": "shared (carrier-grade NAT) network",
		"8.8.8.8": "", "172.32.0.1": "", "100.128.0.1": "", "2001:db8::1": "", "64:ff9b::8.8.8.8": "", "192.169.0.1": "",
	} {
		assert.Equal(t, kind, PrivateKind(netip.MustParseAddr(s)), s)
	}
	assert.True(t, BlockedAddr(netip.MustParseAddr("64:ff9b::169.254.169.254")), "metadata through NAT64")
	for _, h := range []string{"localhost", "LOCALHOST.", "app.localhost", "127.0.0.1", "[::1]", "10.0.0.1"} {
		assert.True(t, PrivateHost(h), h)
	}
	for _, h := range []string{"example.com", "localhost.example.com", "8.8.8.8", "mylocalhost"} {
		assert.False(t, PrivateHost(h), h)
	}
}

// TestWebFetch_ConnectCheck: the system dialer's check at connect time
// refuses a blocked address, and a private one nobody allowed.
func TestWebFetch_ConnectCheck(t *testing.T) {
	g := &Dialer{}
	require.ErrorIs(t, g.control(t.Context(), "tcp4", "169.254.169.254:80", nil), ErrBlockedAddress)
	require.ErrorIs(t, g.control(t.Context(), "tcp4", "10.0.0.1:80", nil), ErrPrivateAddress)
	require.ErrorIs(t, g.control(t.Context(), "tcp6", "[::ffff:127.0.0.1]:80", nil), ErrPrivateAddress)
	require.NoError(t, g.control(t.Context(), "tcp4", "8.8.8.8:443", nil))
	g.allowed = map[netip.Addr]bool{netip.MustParseAddr("10.0.0.1"): true}
	require.NoError(t, g.control(t.Context(), "tcp4", "10.0.0.1:80", nil))
	g = &Dialer{AllowPrivate: true}
	require.NoError(t, g.control(t.Context(), "tcp4", "192.168.1.1:80", nil))
	require.ErrorIs(t, g.control(t.Context(), "tcp4", "169.254.169.254:80", nil), ErrBlockedAddress)
}
