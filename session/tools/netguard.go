package tools

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strings"
)

// The network guard of web_fetch. Link-local and cloud-metadata addresses
// hand out credentials to whoever asks from inside a VM, so they are
// refused in every approval mode (yolo too): by name before anything is
// resolved, and by address after resolution, before any connection is
// made. The guard dials the checked address itself, so a DNS answer cannot
// change between the check and the connection (rebinding), and it runs for
// every hop of a redirect.

// ErrBlockedAddress is the refusal of a link-local or metadata address.
var ErrBlockedAddress = errors.New("refused: link-local and cloud-metadata addresses are never fetched")

// blockedNames are metadata services' host names (lower case, no final dot).
var blockedNames = map[string]bool{
	"metadata.google.internal":   true, // GCP
	"metadata.goog":              true, // GCP
	"metadata":                   true, // GCP short name, in the VM's search domain
	"instance-data":              true, // AWS (old EC2 name)
	"instance-data.ec2.internal": true,
	"metadata.azure.com":         true,
	"metadata.oraclecloud.com":   true,
}

// blockedPrefixes are link-local ranges and the metadata addresses outside
// them.
var blockedPrefixes = []netip.Prefix{
	netip.MustParsePrefix("169.254.0.0/16"),     // IPv4 link-local: AWS, GCP, Azure, OpenStack metadata at .169.254
	netip.MustParsePrefix("fe80::/10"),          // IPv6 link-local
	netip.MustParsePrefix("fd00:ec2::254/128"),  // AWS metadata over IPv6
	netip.MustParsePrefix("100.100.100.200/32"), // Alibaba Cloud metadata
	netip.MustParsePrefix("168.63.129.16/32"),   // Azure wire server
	netip.MustParsePrefix("fd20:ce::254/128"),   // GCP metadata over IPv6
	netip.MustParsePrefix("192.0.0.192/32"),     // Oracle Cloud metadata (IPv4 special-purpose)
}

// blockedHost reports whether host (a name or an address literal, with or
// without brackets) is refused without resolving it.
func blockedHost(host string) bool {
	h := strings.TrimSuffix(strings.ToLower(strings.Trim(host, "[]")), ".")
	if blockedNames[h] {
		return true
	}
	if a, err := netip.ParseAddr(h); err == nil {
		return blockedAddr(a)
	}
	return false
}

// blockedAddr reports whether a is link-local or a metadata address; an
// IPv4-mapped IPv6 address is judged as the IPv4 address it carries.
func blockedAddr(a netip.Addr) bool {
	a = a.Unmap().WithZone("")
	if a.IsLinkLocalUnicast() || a.IsLinkLocalMulticast() {
		return true
	}
	for _, p := range blockedPrefixes {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// NetHooks replace web_fetch's resolver and dialer; tests use them to
// record what would be dialled. Nil fields use the system's.
type NetHooks struct {
	Resolve func(ctx context.Context, host string) ([]netip.Addr, error)
	Dial    func(ctx context.Context, network, addr string) (net.Conn, error)
}

// guardedDialer resolves, checks and then dials one checked address.
type guardedDialer struct{ hooks NetHooks }

func (g guardedDialer) DialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, err
	}
	if blockedHost(host) {
		return nil, fmt.Errorf("%w: %s", ErrBlockedAddress, host)
	}
	var addrs []netip.Addr
	if a, err := netip.ParseAddr(strings.Trim(host, "[]")); err == nil {
		addrs = []netip.Addr{a}
	} else {
		resolve := g.hooks.Resolve
		if resolve == nil {
			resolve = func(ctx context.Context, host string) ([]netip.Addr, error) {
				return net.DefaultResolver.LookupNetIP(ctx, "ip", host)
			}
		}
		if addrs, err = resolve(ctx, host); err != nil {
			return nil, err
		}
		if len(addrs) == 0 {
			return nil, fmt.Errorf("%s: no addresses", host)
		}
	}
	// A name with any blocked address is refused whole: trying the others
	// would still hand the attacker a chance at the blocked one.
	for _, a := range addrs {
		if blockedAddr(a) {
			return nil, fmt.Errorf("%w: %s resolves to %s", ErrBlockedAddress, host, a.Unmap())
		}
	}
	dial := g.hooks.Dial
	if dial == nil {
		dial = (&net.Dialer{}).DialContext
	}
	var errs []error
	for _, a := range addrs {
		c, err := dial(ctx, network, net.JoinHostPort(a.Unmap().String(), port))
		if err == nil {
			return c, nil
		}
		errs = append(errs, err)
		if ctx.Err() != nil {
			break
		}
	}
	return nil, errors.Join(errs...)
}
