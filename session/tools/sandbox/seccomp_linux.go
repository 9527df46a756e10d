package sandbox

import (
	"fmt"
	"runtime"
	"unsafe"

	"golang.org/x/sys/unix"
)

// installFilter installs the commands' seccomp filter on the calling
// thread (inherited across execve and by children). It always refuses:
//   - ioctl TIOCSTI and TIOCLINUX (EPERM), which push keystrokes into a
//     terminal's input: a command could type a line into the shell of the
//     user's terminal (acpd's, or the editor's), to be run there
//     unconfined once acpd exits. Landlock's IOCTL_DEV right would refuse
//     every device ioctl, raw mode included; this refuses just these two;
//   - system calls of another architecture or of the x32 ABI, which would
//     otherwise reach the kernel under numbers the filter does not check.
//
// With the network off (netOff) it also refuses (EACCES, like Landlock):
//   - socket(2) for any family but AF_UNIX and AF_NETLINK (so TCP, UDP,
//     MPTCP, raw and packet sockets), which also covers what Landlock's
//     TCP-only rules (ABI 4–9) miss;
//   - io_uring_setup, since io_uring can open sockets without socket(2).
//
// Behind the proxy (netProxy) commands live in a network namespace of
// their own, whose only way out is the proxy: socket(2) is allowed for
// AF_INET, AF_INET6 and AF_NETLINK only — not AF_UNIX, since a unix
// socket's path reaches the machine's services whatever the namespace
// (/var/run/docker.sock, D-Bus, an agent's socket); socketpair(2) stays —
// and io_uring_setup and setns(2) are refused (root could otherwise join a
// namespace a file under /run/netns names).
//
// Everything else is allowed. no_new_privs must already be set. With
// allThreads the filter is synchronized onto every thread of the process
// (SECCOMP_FILTER_FLAG_TSYNC), which fails if any thread has another one.
func installFilter(net netFilter, allThreads bool) error {
	prog, err := filterProgram(net)
	if err != nil {
		return err
	}
	fprog := unix.SockFprog{Len: uint16(len(prog)), Filter: &prog[0]}
	var flags uintptr
	if allThreads {
		flags = unix.SECCOMP_FILTER_FLAG_TSYNC
	}
	r, _, errno := unix.RawSyscall(unix.SYS_SECCOMP, unix.SECCOMP_SET_MODE_FILTER, flags, uintptr(unsafe.Pointer(&fprog)))
	if errno != 0 {
		return errno
	}
	if r != 0 {
		return fmt.Errorf("thread %d could not take the filter", r)
	}
	return nil
}

// bpf is one instruction of a filter being written: jumps name labels,
// resolved into offsets by assemble.
type bpf struct {
	label  string // set on a label pseudo-instruction only
	code   uint16
	k      uint32
	jt, jf string // "" = the next instruction
}

const (
	bpfLoad  = unix.BPF_LD | unix.BPF_W | unix.BPF_ABS
	bpfIfEq  = unix.BPF_JMP | unix.BPF_JEQ | unix.BPF_K
	bpfIfGE  = unix.BPF_JMP | unix.BPF_JGE | unix.BPF_K
	bpfRet   = unix.BPF_RET | unix.BPF_K
	retAllow = unix.SECCOMP_RET_ALLOW
	// struct seccomp_data: int nr; __u32 arch; __u64 ip; __u64 args[6].
	// Arguments are compared by their low 32 bits (little-endian): the
	// ones checked are ints and an ioctl request, which the kernel
	// truncates to 32 bits itself.
	offNr   = 0
	offArch = 4
	offArg0 = 16
	offArg1 = 24
	x32Flag = 0x40000000
)

func label(name string) bpf                     { return bpf{label: name} }
func load(off uint32) bpf                       { return bpf{code: bpfLoad, k: off} }
func ret(v uint32) bpf                          { return bpf{code: bpfRet, k: v} }
func ifEq(k uint32, jt, jf string) bpf          { return bpf{code: bpfIfEq, k: k, jt: jt, jf: jf} }
func ifGE(k uint32, jt, jf string) bpf          { return bpf{code: bpfIfGE, k: k, jt: jt, jf: jf} }
func retErrno(e unix.Errno) bpf                 { return ret(unix.SECCOMP_RET_ERRNO | uint32(e)) }
func assembleErr(format string, a ...any) error { return fmt.Errorf("seccomp filter: "+format, a...) }

// netFilter is what the seccomp filter does about sockets.
type netFilter int

const (
	netOpen  netFilter = iota // nothing
	netOff                    // unix and netlink sockets only
	netProxy                  // IP and netlink sockets only, no setns
)

// filterProgram is installFilter's BPF program for this architecture.
func filterProgram(net netFilter) ([]unix.SockFilter, error) {
	var arch uint32
	switch runtime.GOARCH {
	case "amd64":
		arch = unix.AUDIT_ARCH_X86_64
	case "arm64":
		arch = unix.AUDIT_ARCH_AARCH64
	default:
		return nil, fmt.Errorf("no seccomp filter for %s", runtime.GOARCH)
	}
	p := []bpf{
		load(offArch),
		ifEq(arch, "", "refuse"),
		load(offNr),
		ifGE(x32Flag, "refuse", ""),
		ifEq(unix.SYS_IOCTL, "ioctl", ""),
	}
	if net != netOpen {
		p = append(p,
			ifEq(unix.SYS_IO_URING_SETUP, "refuse", ""),
			ifEq(unix.SYS_SOCKET, "socket", ""),
		)
	}
	if net == netProxy {
		p = append(p, ifEq(unix.SYS_SETNS, "refuse", ""))
	}
	p = append(p, ret(retAllow),
		label("ioctl"),
		load(offArg1),
		ifEq(unix.TIOCSTI, "eperm", ""),
		ifEq(unix.TIOCLINUX, "eperm", ""),
		ret(retAllow),
		label("eperm"),
		retErrno(unix.EPERM),
	)
	switch net {
	case netOff, netProxy:
		families := []uint32{unix.AF_UNIX, unix.AF_NETLINK}
		if net == netProxy {
			families = []uint32{unix.AF_INET, unix.AF_INET6, unix.AF_NETLINK}
		}
		p = append(p, label("socket"), load(offArg0))
		for _, f := range families {
			p = append(p, ifEq(f, "allow", ""))
		}
		p = append(p,
			label("refuse"),
			retErrno(unix.EACCES),
			label("allow"),
			ret(retAllow),
		)
	default:
		p = append(p, label("refuse"), retErrno(unix.EACCES))
	}
	return assemble(p)
}

// assemble resolves labels into the forward jump offsets classic BPF
// counts (instructions skipped after the jump).
func assemble(p []bpf) ([]unix.SockFilter, error) {
	at := map[string]int{}
	n := 0
	for _, in := range p {
		if in.label != "" {
			at[in.label] = n
			continue
		}
		n++
	}
	out := make([]unix.SockFilter, 0, n)
	for _, in := range p {
		if in.label != "" {
			continue
		}
		i := len(out)
		off := func(target string) (uint8, error) {
			if target == "" {
				return 0, nil
			}
			t, ok := at[target]
			if !ok || t <= i || t-i-1 > 255 {
				return 0, assembleErr("bad jump from %d to %q", i, target)
			}
			return uint8(t - i - 1), nil
		}
		jt, err := off(in.jt)
		if err != nil {
			return nil, err
		}
		jf, err := off(in.jf)
		if err != nil {
			return nil, err
		}
		out = append(out, unix.SockFilter{Code: in.code, Jt: jt, Jf: jf, K: in.k})
	}
	return out, nil
}
