// Package netguard is the network guard of web_fetch. Link-local and
// cloud-metadata addresses hand out credentials to whoever asks from inside
// a VM, so they are refused in every approval mode (yolo too): by name
// before anything is resolved, and by address after resolution, before any
// connection is made. Loopback and private network addresses (this machine's services,
// the office network, a tailnet) are not the internet either: reaching one
// needs the user's permission every time, in every approval mode, unless
// tools.webFetchAllowPrivate says otherwise. The guard dials the checked
// address itself, so a DNS answer cannot change between the check and the
// connection (rebinding); it runs for every hop of a redirect, and the
// system dialer checks the address again when it connects.
package netguard

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strings"
	"sync"
	"syscall"
)

// ErrBlockedAddress is the refusal of a link-local or metadata address.
var ErrBlockedAddress = errors.New("refused: link-local and cloud-metadata addresses are never fetched")

// ErrPrivateAddress is the refusal of a loopback or private network
// address the user did not allow.
var ErrPrivateAddress = errors.New("refused: loopback and private network addresses are fetched only when the user allows it, each time")

// blockedNames are metadata services' host names (lower case, no final dot).
// It and the prefix lists below are built on the first fetch, not by
// package initialization on every start.
var blockedNames = sync.OnceValue(func() map[string]bool {
	return map[string]bool{
		"metadata.google.internal":   true, // GCP
		"metadata.goog":              true, // GCP
		"metadata":                   true, // GCP short name, in the VM's search domain
		"instance-data":              true, // AWS (old EC2 name)
		"instance-data.ec2.internal": true,
		"metadata.azure.com":         true,
		"metadata.oraclecloud.com":   true,
	}
})

// blockedPrefixes are link-local ranges and the metadata addresses outside
// them.
var blockedPrefixes = sync.OnceValue(func() []netip.Prefix {
	return []netip.Prefix{
		netip.MustParsePrefix("169.254.0.0/16"),     // IPv4 link-local: AWS, GCP, Azure, OpenStack metadata at .169.254
		netip.MustParsePrefix("fe80::/10"),          // IPv6 link-local
		netip.MustParsePrefix("fd00:ec2::254/128"),  // AWS metadata over IPv6
		netip.MustParsePrefix("100.100.100.200/32"), // Alibaba Cloud metadata
		netip.MustParsePrefix("168.63.129.16/32"),   // Azure wire server
		netip.MustParsePrefix("fd20:ce::254/128"),   // GCP metadata over IPv6
		netip.MustParsePrefix("192.0.0.192/32"),     // Oracle Cloud metadata (IPv4 special-purpose)
	}
})

// BlockedHost reports whether host (a name or an address literal, with or
// without brackets) is refused without resolving it.
func BlockedHost(host string) bool {
	h := normHost(host)
	if blockedNames()[h] {
		return true
	}
	if a, err := netip.ParseAddr(h); err == nil {
		return BlockedAddr(a)
	}
	return false
}

// normHost is host in lower case, without brackets, zone or final dot.
func normHost(host string) string {
	return strings.TrimSuffix(strings.ToLower(strings.Trim(host, "[]")), ".")
}

// nat64 is the well-known NAT64 prefix: a connection to 64:ff9b::a.b.c.d
// reaches the IPv4 address a.b.c.d through the network's translator.
var nat64 = sync.OnceValue(func() netip.Prefix { return netip.MustParsePrefix("64:ff9b::/96") })

// reached is the address a connection to a really reaches: an IPv4-mapped
// or NAT64 address is the IPv4 address it carries.
func reached(a netip.Addr) netip.Addr {
	a = a.Unmap().WithZone("")
	if nat64().Contains(a) {
		b := a.As16()
		return netip.AddrFrom4([4]byte(b[12:]))
	}
	return a
}

// BlockedAddr reports whether a is link-local or a metadata address.
func BlockedAddr(a netip.Addr) bool {
	a = reached(a)
	if a.IsLinkLocalUnicast() || a.IsLinkLocalMulticast() {
		return true
	}
	for _, p := range blockedPrefixes() {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// privatePrefixes are the addresses that reach this machine or a private
// network. Decision: besides loopback, RFC 1918 and ULA, carrier-grade NAT
// space (RFC 6598) is private too — ISPs' internal networks and the
// addresses of Tailscale and similar tailnets live there —, as are the
// unspecified addresses (a connection to 0.0.0.0 reaches this machine on
// Linux) and the deprecated site-local fec0::/10.
var privatePrefixes = sync.OnceValue(func() []privatePrefix {
	return []privatePrefix{
		{netip.MustParsePrefix("127.0.0.0/8"), "loopback"},
		{netip.MustParsePrefix("::1/128"), "loopback"},
		{netip.MustParsePrefix("0.0.0.0/8"), "this machine"},
		{netip.MustParsePrefix("::/128"), "this machine"},
		{netip.MustParsePrefix("10.0.0.0/8"), "private network"},
		{netip.MustParsePrefix("172.16.0.0/12"), "private network"},
		{netip.MustParsePrefix("192.168.0.0/16"), "private network"},
		{netip.MustParsePrefix("fc00::/7"), "private network"},
		{netip.MustParsePrefix("fec0::/10"), "private network"},
		{netip.MustParsePrefix("100.64.0.0/10"), "shared (carrier-grade NAT) network"},
	}
})

type privatePrefix struct {
	p    netip.Prefix
	kind string
}

// PrivateKind says what private space a belongs to; "" for a public
// address.
func PrivateKind(a netip.Addr) string {
	a = reached(a)
	for _, p := range privatePrefixes() {
		if p.p.Contains(a) {
			return p.kind
		}
	}
	return ""
}

// localName reports whether host is localhost by definition (RFC 6761):
// it is treated as private whatever it resolves to.
func localName(host string) bool {
	h := normHost(host)
	return h == "localhost" || strings.HasSuffix(h, ".localhost")
}

// PrivateHost reports whether host is known to be private without
// resolving it: localhost, or a private address literal.
func PrivateHost(host string) bool {
	if localName(host) {
		return true
	}
	a, err := netip.ParseAddr(normHost(host))
	return err == nil && PrivateKind(a) != ""
}

// Hooks replace web_fetch's resolver and dialer; tests use them to
// record what would be dialled. Nil fields use the system's.
type Hooks struct {
	Resolve func(ctx context.Context, host string) ([]netip.Addr, error)
	Dial    func(ctx context.Context, network, addr string) (net.Conn, error)
}

// Dialer resolves, checks and then dials one checked address.
type Dialer struct {
	Hooks Hooks
	// AllowPrivate reaches private addresses without asking.
	AllowPrivate bool
	// Permit asks the user to allow host's private addresses; nil refuses.
	Permit func(ctx context.Context, host string, addrs []netip.Addr) (bool, error)

	mu sync.Mutex
	// allowed are the private addresses the user allowed for this call.
	allowed map[netip.Addr]bool
	// ready are a host's addresses checked before the request, used by
	// its first connection instead of resolving the name again.
	ready map[string][]netip.Addr
}

func (g *Dialer) resolve(ctx context.Context, host string) ([]netip.Addr, error) {
	if a, err := netip.ParseAddr(normHost(host)); err == nil {
		return []netip.Addr{a}, nil
	}
	resolve := g.Hooks.Resolve
	if resolve == nil {
		resolve = func(ctx context.Context, host string) ([]netip.Addr, error) {
			return net.DefaultResolver.LookupNetIP(ctx, "ip", host)
		}
	}
	addrs, err := resolve(ctx, host)
	if err != nil {
		return nil, err
	}
	if len(addrs) == 0 {
		return nil, fmt.Errorf("%s: no addresses", host)
	}
	return addrs, nil
}

// check resolves host and returns its addresses, once they passed: a
// name with any blocked address is refused whole (trying the others would
// still hand the attacker a chance at the blocked one), and one with a
// private address the user has not allowed for this call is asked about.
func (g *Dialer) check(ctx context.Context, host string) ([]netip.Addr, error) {
	if BlockedHost(host) {
		return nil, fmt.Errorf("%w: %s", ErrBlockedAddress, host)
	}
	addrs, err := g.resolve(ctx, host)
	if err != nil {
		return nil, err
	}
	for _, a := range addrs {
		if BlockedAddr(a) {
			return nil, fmt.Errorf("%w: %s resolves to %s", ErrBlockedAddress, host, a.Unmap())
		}
	}
	if g.AllowPrivate {
		return addrs, nil
	}
	g.mu.Lock()
	ask := false
	for _, a := range addrs {
		if (localName(host) || PrivateKind(a) != "") && !g.allowed[a.Unmap()] {
			ask = true
		}
	}
	g.mu.Unlock()
	if !ask {
		return addrs, nil
	}
	if g.Permit == nil {
		return nil, fmt.Errorf("%w: %s is %s, and no one can be asked", ErrPrivateAddress, host, DescribeAddrs(addrs))
	}
	ok, err := g.Permit(ctx, host, addrs)
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, fmt.Errorf("%w: the user did not allow %s (%s)", ErrPrivateAddress, host, DescribeAddrs(addrs))
	}
	g.mu.Lock()
	if g.allowed == nil {
		g.allowed = map[netip.Addr]bool{}
	}
	for _, a := range addrs {
		g.allowed[a.Unmap()] = true
	}
	g.mu.Unlock()
	return addrs, nil
}

// Prepare checks host before the request is made (and before its timeout
// runs, since the user may take a while to answer); its first connection
// then uses the addresses checked.
func (g *Dialer) Prepare(ctx context.Context, host string) error {
	addrs, err := g.check(ctx, host)
	if err != nil {
		return err
	}
	g.mu.Lock()
	g.ready = map[string][]netip.Addr{normHost(host): addrs}
	g.mu.Unlock()
	return nil
}

// DialContext connects to addr's host at one of its checked addresses:
// those Prepare checked for its first connection, else checked now.
func (g *Dialer) DialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, err
	}
	g.mu.Lock()
	addrs, ok := g.ready[normHost(host)]
	delete(g.ready, normHost(host))
	g.mu.Unlock()
	if !ok {
		if addrs, err = g.check(ctx, host); err != nil {
			return nil, err
		}
	}
	dial := g.Hooks.Dial
	if dial == nil {
		dial = (&net.Dialer{ControlContext: g.control}).DialContext
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

// control checks the address the socket is about to connect to, once
// more, where nothing can change it any longer.
func (g *Dialer) control(_ context.Context, _, address string, _ syscall.RawConn) error {
	ap, err := netip.ParseAddrPort(address)
	if err != nil {
		return fmt.Errorf("%w: cannot check %s: %v", ErrBlockedAddress, address, err)
	}
	a := ap.Addr()
	if BlockedAddr(a) {
		return fmt.Errorf("%w: %s", ErrBlockedAddress, a.Unmap())
	}
	if PrivateKind(a) == "" || g.AllowPrivate {
		return nil
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if !g.allowed[a.Unmap()] {
		return fmt.Errorf("%w: %s", ErrPrivateAddress, a.Unmap())
	}
	return nil
}

// DescribeAddrs names addresses with their kinds: "127.0.0.1 (loopback)".
func DescribeAddrs(addrs []netip.Addr) string {
	parts := make([]string, 0, len(addrs))
	for _, a := range addrs {
		s := a.Unmap().String()
		if k := PrivateKind(a); k != "" {
			s += " (" + k + ")"
		}
		parts = append(parts, s)
	}
	return strings.Join(parts, ", ")
}
