package sandbox

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
)

// ProxyServer is the proxy of one session in proxy mode (package netproxy,
// made by Settings.NewProxy): it serves the listeners handed to it. The
// sandbox package does not import netproxy itself: the helper's package
// init must run before acpd's heavier packages (net/http among them), and
// Go initializes a package only after everything it imports.
type ProxyServer interface {
	Serve(ln net.Listener)
	Close() error
}

// ProxyConfig is what a session gives its proxy: the ports never reached
// on this machine (acpd's served API), how to ask about a host
// (host:port) nothing allowed, and where refusals go.
type ProxyConfig struct {
	DenyPorts []uint16
	Ask       func(ctx context.Context, target string) (bool, error)
	Refused   func(target, why string)
}

// NetworkAsker is how a running command's tool call takes part in proxy
// mode: Ask asks the user about a host the command wants to reach (true
// when allowed; the asker keeps "always" answers itself), Refused hears of
// each refusal, so the command's result can tell the model.
type NetworkAsker struct {
	Ask     func(ctx context.Context, target string) (bool, error)
	Refused func(target, why string)
}

// Proxied reports whether the session's commands reach the network through
// acpd's proxy: they must then be run by acpd itself (the spawn server
// hosts the proxy's namespace), not in the editor's terminal.
func (s *Session) Proxied() bool {
	return s != nil && s.p.Enabled() && s.p.Proxy && s.p.status().Usable() && s.p.PrivateShm() == nil
}

// Running registers a command that runs now, until done is called: the
// proxy asks the most recent one about a host nothing allowed, and tells
// it of refusals. (The proxy cannot tell which of a session's commands
// opened a connection; a session seldom runs two at once.)
func (s *Session) Running(a *NetworkAsker) (done func()) {
	if s == nil {
		return func() {}
	}
	s.pmu.Lock()
	s.running = append(s.running, a)
	s.pmu.Unlock()
	return func() {
		s.pmu.Lock()
		defer s.pmu.Unlock()
		for i, r := range s.running {
			if r == a {
				s.running = append(s.running[:i], s.running[i+1:]...)
				break
			}
		}
	}
}

// current is the most recent running command, nil when none runs.
func (s *Session) current() *NetworkAsker {
	s.pmu.Lock()
	defer s.pmu.Unlock()
	if len(s.running) == 0 {
		return nil
	}
	return s.running[len(s.running)-1]
}

// netProxy is the session's proxy, made at its first proxied server; nil
// when the policy has no way to make one.
func (s *Session) netProxy() ProxyServer {
	s.pmu.Lock()
	defer s.pmu.Unlock()
	if s.proxy == nil && s.p.NewProxy != nil {
		s.proxy = s.p.NewProxy(ProxyConfig{
			DenyPorts: s.p.deniedPorts(),
			Ask: func(ctx context.Context, target string) (bool, error) {
				a := s.current()
				if a == nil || a.Ask == nil {
					return false, errors.New("no command of the session is running to ask for")
				}
				return a.Ask(ctx, target)
			},
			Refused: func(target, why string) {
				if a := s.current(); a != nil && a.Refused != nil {
					a.Refused(target, why)
				}
			},
		})
	}
	return s.proxy
}

func (s *Session) closeProxy() {
	s.pmu.Lock()
	p := s.proxy
	s.proxy = nil
	s.pmu.Unlock()
	if p != nil {
		_ = p.Close()
	}
}

// Contained reports whether this session's commands run confined with the
// user's secrets unreadable and the network only through acpd's proxy
// (which also refuses unix sockets) — commands that
// need no question, whatever they are (tools.autoAllowConfined) — and, when
// not, why, in words for the user. It is decided from the policy and the
// kernel, as Wrap decides; a command run otherwise (the editor's terminal
// in proxy mode is never used) is no different.
func (s *Session) Contained() (bool, string) {
	switch {
	case s == nil || !s.p.Enabled():
		return false, "the shell sandbox is off ([tools] sandbox = \"off\")"
	case !s.p.status().Usable():
		return false, fmt.Sprintf("the kernel cannot confine commands (%v)", s.p.status().Err)
	case len(s.p.DenyRead) == 0:
		return false, "no path is denied to commands ([tools] sandboxDenyRead removed every default)"
	case !s.p.DenyNetwork && !s.p.Proxy:
		return false, "the network is open to commands ([tools] sandboxNetwork = true; set it to \"proxy\")"
	case !s.p.Proxy:
		// With the network off, Landlock and the socket filter still let
		// a command connect to unix sockets (docker.sock is a full
		// escape); only proxy mode refuses them.
		return false, "commands can still connect to unix sockets such as docker.sock ([tools] sandboxNetwork = false; set it to \"proxy\")"
	case s.p.PrivateShm() != nil:
		return false, fmt.Sprintf("proxy mode needs a network namespace, which the kernel refuses (%v)", s.p.PrivateShm())
	}
	writable := append(append([]string(nil), s.roots...), s.gitDirs...)
	extra, _ := s.p.extraWritable()
	writable = append(writable, extra...)
	if gaps := deniedWithin(s.p.DenyRead, writable); len(gaps) > 0 {
		return false, fmt.Sprintf("%s lies in a folder commands may write, where a command could rename it and a later one read it", strings.Join(shortList(gaps, 3), ", "))
	}
	return true, ""
}
