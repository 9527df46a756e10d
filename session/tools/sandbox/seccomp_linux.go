package sandbox

import (
	"fmt"
	"runtime"
	"unsafe"

	"golang.org/x/sys/unix"
)

// denyNetwork installs a seccomp filter on the calling thread (inherited
// across execve and by children) that refuses with EACCES, like Landlock:
//   - socket(2) for any family but AF_UNIX and AF_NETLINK (so TCP, UDP,
//     MPTCP, raw and packet sockets), which also covers what Landlock's
//     TCP-only rules (ABI 4–9) miss;
//   - io_uring_setup, since io_uring can open sockets without socket(2);
//   - system calls of another architecture or of the x32 ABI, which would
//     otherwise reach the kernel under numbers the filter does not check.
//
// Everything else is allowed. no_new_privs must already be set. With
// allThreads the filter is synchronized onto every thread of the process
// (SECCOMP_FILTER_FLAG_TSYNC), which fails if any thread has another one.
func denyNetwork(allThreads bool) error {
	var arch uint32
	switch runtime.GOARCH {
	case "amd64":
		arch = unix.AUDIT_ARCH_X86_64
	case "arm64":
		arch = unix.AUDIT_ARCH_AARCH64
	default:
		return fmt.Errorf("no network filter for %s", runtime.GOARCH)
	}
	const (
		load    = unix.BPF_LD | unix.BPF_W | unix.BPF_ABS
		ifEq    = unix.BPF_JMP | unix.BPF_JEQ | unix.BPF_K
		ifGE    = unix.BPF_JMP | unix.BPF_JGE | unix.BPF_K
		ret     = unix.BPF_RET | unix.BPF_K
		allow   = unix.SECCOMP_RET_ALLOW
		refuse  = unix.SECCOMP_RET_ERRNO | uint32(unix.EACCES)
		nrOff   = 0  // struct seccomp_data: int nr
		archOff = 4  // __u32 arch
		arg0Off = 16 // __u64 args[0]; the low half on little-endian
		x32Flag = 0x40000000
	)
	// Jt/Jf count the instructions skipped after the current one.
	prog := []unix.SockFilter{
		/* 0 */ {Code: load, K: archOff},
		/* 1 */ {Code: ifEq, Jt: 1, K: arch},
		/* 2 */ {Code: ret, K: refuse},
		/* 3 */ {Code: load, K: nrOff},
		/* 4 */ {Code: ifGE, Jt: 6, K: x32Flag}, // → 11
		/* 5 */ {Code: ifEq, Jt: 5, K: unix.SYS_IO_URING_SETUP}, // → 11
		/* 6 */ {Code: ifEq, Jt: 1, K: unix.SYS_SOCKET}, // → 8
		/* 7 */ {Code: ret, K: allow},
		/* 8 */ {Code: load, K: arg0Off},
		/* 9 */ {Code: ifEq, Jt: 2, K: unix.AF_UNIX}, // → 12
		/* 10 */ {Code: ifEq, Jt: 1, K: unix.AF_NETLINK}, // → 12
		/* 11 */ {Code: ret, K: refuse},
		/* 12 */ {Code: ret, K: allow},
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
