package sandbox

import (
	"errors"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"

	ll "github.com/landlock-lsm/go-landlock/landlock/syscall"
	"golang.org/x/sys/unix"
)

// Proxy mode (tools.sandboxNetwork = "proxy"). The session's spawn server
// is started in a network namespace of its own (CLONE_NEWNET; for a user
// other than root inside the user namespace it gets for /dev/shm), where
// the only interface is loopback. Before it confines itself it brings
// loopback up, listens on 127.0.0.1 there, and hands that listening socket
// to acpd with its start-up answer: acpd serves its HTTP/CONNECT proxy
// (package netproxy) on it, from outside. A command therefore reaches no
// address of this machine or any other directly — there is no route — and
// its only way out is a request to the proxy, which names the host it
// wants. A Landlock port rule alone would not do: it lets a command reach
// any host on the proxy's port. Unix sockets are filtered too (seccomp),
// since a socket's path reaches the machine's services whatever the
// network namespace.
//
// The commands find the proxy in HTTP_PROXY, HTTPS_PROXY and ALL_PROXY and
// their lower-case forms (curl reads only http_proxy in lower case), with
// no NO_PROXY: a request for localhost goes to the proxy too, and so to
// the machine's loopback only if the user allowed it there.

// proxyEnvNames are set to the proxy's URL; noProxyNames are removed.
var (
	proxyEnvNames = []string{"HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy"}
	noProxyNames  = []string{"NO_PROXY", "no_proxy"}
)

// withProxy is environ pointing every HTTP client at the proxy on port.
func withProxy(environ []string, port int) []string {
	out := slices.DeleteFunc(slices.Clone(environ), func(kv string) bool {
		name, _, _ := strings.Cut(kv, "=")
		return slices.Contains(proxyEnvNames, name) || slices.Contains(noProxyNames, name)
	})
	url := "http://127.0.0.1:" + strconv.Itoa(port)
	for _, n := range proxyEnvNames {
		out = append(out, n+"="+url)
	}
	return out
}

// netNamespace names the calling thread's network namespace ("net:[N]").
func netNamespace() (string, error) { return os.Readlink("/proc/thread-self/ns/net") }

// proxyListener brings loopback up in this process's network namespace —
// which must not be outer, the daemon's — and listens on 127.0.0.1 there:
// the listening socket's descriptor and its port.
func proxyListener(outer string) (fd, port int, err error) {
	mine, err := netNamespace()
	if err != nil {
		return -1, 0, fmt.Errorf("proxy: %w", err)
	}
	if outer == "" || mine == outer {
		return -1, 0, errors.New("proxy: the spawn server was not started in a network namespace of its own")
	}
	if err := loopbackUp(); err != nil {
		return -1, 0, fmt.Errorf("proxy: bringing loopback up: %w", err)
	}
	fd, err = unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return -1, 0, fmt.Errorf("proxy: socket: %w", err)
	}
	if err := unix.Bind(fd, &unix.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}); err != nil {
		unix.Close(fd)
		return -1, 0, fmt.Errorf("proxy: bind: %w", err)
	}
	if err := unix.Listen(fd, 512); err != nil {
		unix.Close(fd)
		return -1, 0, fmt.Errorf("proxy: listen: %w", err)
	}
	sa, err := unix.Getsockname(fd)
	if err != nil {
		unix.Close(fd)
		return -1, 0, fmt.Errorf("proxy: %w", err)
	}
	in, ok := sa.(*unix.SockaddrInet4)
	if !ok {
		unix.Close(fd)
		return -1, 0, errors.New("proxy: not an IPv4 socket")
	}
	return fd, in.Port, nil
}

// loopbackUp sets IFF_UP on "lo" (a new network namespace has it down).
func loopbackUp() error {
	s, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(s)
	ifr, err := unix.NewIfreq("lo")
	if err != nil {
		return err
	}
	if err := unix.IoctlIfreq(s, unix.SIOCGIFFLAGS, ifr); err != nil {
		return err
	}
	ifr.SetUint16(ifr.Uint16() | unix.IFF_UP)
	return unix.IoctlIfreq(s, unix.SIOCSIFFLAGS, ifr)
}

// rootCaps are the capabilities a confined command of root keeps: Docker's
// default set without NET_RAW — what builds, package managers and tests of
// root need (file ownership and modes, setuid for dropping to a user,
// binding low ports). Every other one is dropped from the bounding set
// before the command runs, so root's commands hold none of them: not
// NET_ADMIN (a veth pair to the machine's namespace would undo proxy
// mode), not SYS_ADMIN, SYS_PTRACE, SYS_MODULE, SYS_RAWIO, DAC_READ_SEARCH
// (open_by_handle_at), BPF, PERFMON. Landlock confines root as anyone; these
// are what would reach around it.
var rootCaps = []uintptr{
	unix.CAP_CHOWN, unix.CAP_DAC_OVERRIDE, unix.CAP_FSETID, unix.CAP_FOWNER, unix.CAP_MKNOD,
	unix.CAP_SETGID, unix.CAP_SETUID, unix.CAP_SETFCAP, unix.CAP_SETPCAP, unix.CAP_NET_BIND_SERVICE,
	unix.CAP_SYS_CHROOT, unix.CAP_KILL, unix.CAP_AUDIT_WRITE,
}

// dropRootCaps drops from the bounding set (of this thread, or with
// allThreads of every thread) each capability not in rootCaps. Only root's
// helpers do: other users' commands hold no capability at all.
func dropRootCaps(allThreads bool) error {
	if os.Geteuid() != 0 {
		return nil
	}
	prctl := unix.Prctl
	if allThreads {
		prctl = ll.AllThreadsPrctl
	}
	last := lastCap()
	for c := uintptr(0); c <= last; c++ {
		if slices.Contains(rootCaps, c) {
			continue
		}
		if err := prctl(unix.PR_CAPBSET_DROP, c, 0, 0, 0); err != nil && !errors.Is(err, unix.EINVAL) {
			return fmt.Errorf("dropping capability %d: %w", c, err)
		}
	}
	return nil
}

// lastCap is the highest capability this kernel knows.
func lastCap() uintptr {
	b, err := os.ReadFile("/proc/sys/kernel/cap_last_cap")
	if err == nil {
		if n, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil && n > 0 && n < 64 {
			return uintptr(n)
		}
	}
	return 63
}
