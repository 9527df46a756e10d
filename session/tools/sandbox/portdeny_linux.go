package sandbox

import (
	"fmt"
	"os"
	"slices"
	"sync"

	"github.com/landlock-lsm/go-landlock/landlock"
	ll "github.com/landlock-lsm/go-landlock/landlock/syscall"
	"golang.org/x/sys/unix"
)

// Ports commands may not connect to: the served daemon's own. With the
// network open, a confined command could otherwise reach acpd's API on
// loopback and borrow its authority (start an unconfined MCP server, open a
// session anywhere) — if it had the token, which it can neither read nor
// inherit; the port being closed to it is the second wall. Landlock (ABI
// ≥ 4) rules only allow, per port: the ruleset handles TCP connect and
// grants every port but the denied ones, 65,534 rules. Building it takes
// about 0.1 s, so the daemon builds it once and hands it to each session's
// spawn server as a file descriptor; the per-command helper (a fallback,
// and the editor's terminal) builds its own.

// portRuleset builds a ruleset that lets TCP connect to any port but
// denied; it holds no other rule and handles no other right, so it is
// applied as a layer of its own, on top of the filesystem one.
func portRuleset(denied []uint16) (int, error) {
	cfg := landlock.Config{HandledAccessNet: landlock.AccessNetSet(ll.AccessNetConnectTCP)}
	rules := make([]landlock.Rule, 0, 65536-len(denied))
	for p := 1; p <= 65535; p++ {
		if !slices.Contains(denied, uint16(p)) {
			rules = append(rules, landlock.ConnectTCP(uint16(p)))
		}
	}
	fd, _, err := cfg.NewRulesetFD(rules...)
	if err != nil {
		return -1, fmt.Errorf("landlock port ruleset: %w", err)
	}
	if fd < 0 {
		return -1, fmt.Errorf("landlock port ruleset: this kernel has no TCP rules")
	}
	return fd, nil
}

// portRules is the daemon's one port ruleset, built in the background once
// the ports are known.
type portRules struct {
	once  sync.Once
	ports []uint16
	done  chan struct{}
	file  *os.File
	err   error
}

// DenyConnect keeps confined commands from connecting to these TCP ports
// (on any address) while the network is open: `acpd serve` passes the
// ports it listens on, before any session exists. It needs Landlock ABI 4
// (Linux 6.7); on older kernels the port stays reachable, and Describe says
// so. The ruleset is built at once in the background.
func (p *Policy) DenyConnect(ports ...uint16) {
	if p == nil || len(ports) == 0 || !p.Enabled() || p.DenyNetwork {
		return
	}
	st := p.status()
	if !st.NetworkRules() {
		return
	}
	pr := &portRules{ports: slices.Clone(ports), done: make(chan struct{})}
	p.portsMu.Lock()
	p.ports = pr
	p.portsMu.Unlock()
	go func() {
		defer close(pr.done)
		fd, err := portRuleset(pr.ports)
		if err != nil {
			pr.err = err
			return
		}
		pr.file = os.NewFile(uintptr(fd), "landlock-ports")
	}()
}

// deniedPorts are the ports DenyConnect was given (nil: none).
func (p *Policy) deniedPorts() []uint16 {
	p.portsMu.Lock()
	defer p.portsMu.Unlock()
	if p.ports == nil {
		return nil
	}
	return p.ports.ports
}

// portRulesetFile waits for the port ruleset and returns it (nil when
// there is none or it failed: the spawn server then builds its own from
// --deny-port).
func (p *Policy) portRulesetFile() *os.File {
	p.portsMu.Lock()
	pr := p.ports
	p.portsMu.Unlock()
	if pr == nil {
		return nil
	}
	<-pr.done
	return pr.file
}

// restrictPorts applies the port layer: from the ruleset the daemon built
// (fd ≥ 0) or one built here from ports.
func restrictPorts(fd int, ports []uint16, allThreads bool) error {
	if len(ports) == 0 {
		return nil
	}
	if fd < 0 {
		var err error
		if fd, err = portRuleset(ports); err != nil {
			return err
		}
	}
	defer unix.Close(fd)
	restrict := ll.LandlockRestrictSelf
	if allThreads {
		restrict = ll.AllThreadsLandlockRestrictSelf
	}
	if err := restrict(fd, 0); err != nil {
		return fmt.Errorf("landlock_restrict_self (ports): %w", err)
	}
	return nil
}
