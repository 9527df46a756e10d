package sandbox

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/landlock-lsm/go-landlock/landlock"
	ll "github.com/landlock-lsm/go-landlock/landlock/syscall"
	"golang.org/x/sys/unix"
)

// The spawn server ("zygote"). Re-executing acpd for every confined command
// costs a Go runtime start, the helper's share of initialization and the
// page faults of a large binary: about 4 ms on a quiet machine, tens of ms
// on a loaded one. So a session's first confined command starts ONE helper
// in server mode (`acpd __sandbox-exec --serve FD --rw … [--no-net]`), which
// confines its whole process (every thread: no_new_privs, the seccomp filter
// with TSYNC, Landlock through go-landlock's all-threads restrict) and then
// serves spawn requests on a SOCK_SEQPACKET socket pair: each request is one
// JSON message (argv, env, dir) carrying the command's stdin, stdout and
// stderr as SCM_RIGHTS; the server starts the command in its own session
// (and so its own process group), replies with its pid, and later with its wait status. Its children
// are forked from a confined process and so inherit the domain; the daemon
// stays unrestricted and kills a command's group with kill(-pgid) as before.
//
// The server dies with the daemon (PR_SET_PDEATHSIG, and EOF on its socket,
// upon which it also kills the groups it started) and when the session is
// closed. Anything that goes wrong with it — it cannot start, cannot
// confine itself, dies, or a request does not fit in a message — makes the
// caller fall back to the per-command helper, which still confines (or, in
// mode auto on a kernel that cannot, reports the set-up failure the policy
// decides on): correctness never depends on the server.

// zygoteStartTimeout bounds the server's start-up handshake.
const zygoteStartTimeout = 10 * time.Second

// maxSpawnMessage bounds one request (argv and environment): larger ones
// are not sent (EMSGSIZE) and run through the per-command helper.
const maxSpawnMessage = 1 << 20

type spawnRequest struct {
	ID   uint64   `json:"id"`
	Argv []string `json:"argv"`
	Env  []string `json:"env"`
	Dir  string   `json:"dir"`
}

type spawnReply struct {
	ID uint64 `json:"id"`
	// Ready answers the start-up (ID 0); Err says why not, or why a
	// request could not start. In proxy mode the answer carries the
	// proxy's listening socket (SCM_RIGHTS), ProxyPort its port.
	Ready     bool   `json:"ready,omitempty"`
	ProxyPort int    `json:"proxyPort,omitempty"`
	Err       string `json:"err,omitempty"`
	// Pid is set when the command started; Exited with Status when it
	// was reaped (Status is the raw wait status).
	Pid    int  `json:"pid,omitempty"`
	Exited bool `json:"exited,omitempty"`
	Status int  `json:"status,omitempty"`
}

// serve is the server side: confine this whole process, then start the
// commands the daemon asks for until the socket closes.
func serve(h helperArgs) int {
	f := os.NewFile(uintptr(h.serveFD), "spawn")
	unix.CloseOnExec(h.serveFD)
	c, err := net.FileConn(f)
	f.Close()
	if err != nil {
		fmt.Fprintln(os.Stderr, StderrPrefix+"spawn server: "+err.Error())
		return ExitUnavailable
	}
	conn, ok := c.(*net.UnixConn)
	if !ok {
		fmt.Fprintln(os.Stderr, StderrPrefix+"spawn server: not a unix socket")
		return ExitUnavailable
	}
	var wmu sync.Mutex
	reply := func(r spawnReply) {
		b, _ := json.Marshal(r)
		wmu.Lock()
		defer wmu.Unlock()
		_, _ = conn.Write(b)
	}
	// What the server inherited does not reach the commands it forks.
	if err := InheritNoFiles(); err != nil {
		reply(spawnReply{Err: fmt.Sprintf("sandbox set-up failed: closing inherited files: %v", err)})
		return ExitUnavailable
	}
	st := Probe()
	proxyFD, proxyPort := -1, 0
	switch {
	case !st.Usable():
		reply(spawnReply{Err: fmt.Sprintf("sandbox unavailable: %v", st.Err)})
		return ExitUnavailable
	default:
		if h.shm != "" {
			if err := h.mountShm(false); err != nil {
				reply(spawnReply{Err: fmt.Sprintf("sandbox set-up failed: %v", err)})
				return ExitUnavailable
			}
		}
		if h.proxy {
			// Before Landlock and seccomp: the listener is made in the
			// server's own network namespace, with the capability the
			// daemon gave it there.
			if proxyFD, proxyPort, err = proxyListener(h.outerNet); err != nil {
				reply(spawnReply{Err: fmt.Sprintf("sandbox set-up failed: %v", err)})
				return ExitUnavailable
			}
		}
		// What the server runs gets no capability: with the ambient set
		// empty, an execve by a user other than root keeps none.
		if err := ll.AllThreadsPrctl(unix.PR_CAP_AMBIENT, unix.PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0); err != nil {
			reply(spawnReply{Err: fmt.Sprintf("sandbox set-up failed: dropping the ambient capabilities: %v", err)})
			return ExitUnavailable
		}
		if err := confine(h, st, true); err != nil {
			reply(spawnReply{Err: fmt.Sprintf("sandbox set-up failed: %v", err)})
			return ExitUnavailable
		}
	}
	// Not dumpable: a command of the same user (and, here, the same
	// domain) may not ptrace the server or write its memory to make it
	// report a forged pid, which the daemon would then kill as a group.
	// Its children are dumpable again once they exec.
	if err := unix.Prctl(unix.PR_SET_DUMPABLE, 0, 0, 0, 0); err != nil {
		reply(spawnReply{Err: fmt.Sprintf("sandbox set-up failed: prctl(PR_SET_DUMPABLE): %v", err)})
		return ExitUnavailable
	}
	scope := -1
	if st.SignalScoping() {
		// A ruleset that scopes signals. Each command is forked from a
		// thread that has just entered a new domain made from it, nested
		// in the server's: the command may signal itself and its own
		// children, but neither the server (an outer domain) nor the
		// other commands (sibling domains), nor anything outside.
		// Every Landlock layer denies cross-folder links and renames
		// (REFER) unless a rule grants them, even a layer that handles
		// nothing else; this one grants them everywhere and leaves the
		// decision to the server's layer, which grants them in the
		// writable folders.
		refer := landlock.AccessFSSet(ll.AccessFSRefer)
		cfg := landlock.Config{HandledAccessFS: refer, Scoped: landlock.ScopedSet(ll.ScopeSignal)}
		fd, _, err := cfg.NewRulesetFD(landlock.PathAccess(refer, "/"))
		if err != nil || fd < 0 {
			reply(spawnReply{Err: fmt.Sprintf("sandbox set-up failed: signal-scoping ruleset: %v", err)})
			return ExitUnavailable
		}
		scope = fd
	}
	hello := spawnReply{Ready: true, ProxyPort: proxyPort}
	if proxyFD >= 0 {
		// The proxy's listener goes to the daemon with the answer; the
		// server keeps no copy (its commands must not accept on it).
		b, _ := json.Marshal(hello)
		_, _, err := conn.WriteMsgUnix(b, unix.UnixRights(proxyFD), nil)
		unix.Close(proxyFD)
		if err != nil {
			return ExitUnavailable
		}
	} else {
		reply(hello)
	}

	var (
		mu     sync.Mutex
		groups = map[int]bool{}
	)
	term := make(chan os.Signal, 1)
	signal.Notify(term, syscall.SIGTERM)
	go func() {
		<-term
		mu.Lock()
		for pg := range groups {
			_ = syscall.Kill(-pg, syscall.SIGKILL)
		}
		os.Exit(0)
	}()
	buf := make([]byte, maxSpawnMessage)
	oob := make([]byte, unix.CmsgSpace(3*4))
	for {
		n, oobn, _, _, err := conn.ReadMsgUnix(buf, oob)
		if err != nil || n == 0 {
			// The daemon closed the session or died: take the commands
			// still running with it.
			mu.Lock()
			for pg := range groups {
				_ = syscall.Kill(-pg, syscall.SIGKILL)
			}
			mu.Unlock()
			return 0
		}
		files := receivedFiles(oob[:oobn])
		var req spawnRequest
		if err := json.Unmarshal(buf[:n], &req); err != nil || len(files) != 3 || len(req.Argv) == 0 {
			closeAll(files)
			reply(spawnReply{ID: req.ID, Err: fmt.Sprintf("bad spawn request (%d files): %v", len(files), err)})
			continue
		}
		cmd := exec.Command(req.Argv[0], req.Argv[1:]...)
		cmd.Env, cmd.Dir = req.Env, req.Dir
		if h.proxy {
			cmd.Env = withProxy(req.Env, proxyPort)
		}
		cmd.Stdin, cmd.Stdout, cmd.Stderr = files[0], files[1], files[2]
		// Its own session, which is also its own process group: no
		// controlling terminal to open as /dev/tty and type into.
		cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
		// The start and the group's registration happen under the lock
		// the death-signal handler takes: a daemon killed while the
		// command is starting then finds the group registered, rather
		// than exiting between the two and leaving the command running.
		mu.Lock()
		err = spawnScoped(cmd, scope)
		if err == nil {
			groups[cmd.Process.Pid] = true
		}
		mu.Unlock()
		closeAll(files)
		if err != nil {
			reply(spawnReply{ID: req.ID, Err: err.Error()})
			continue
		}
		pid := cmd.Process.Pid
		reply(spawnReply{ID: req.ID, Pid: pid})
		go func(id uint64) {
			_ = cmd.Wait()
			mu.Lock()
			delete(groups, pid)
			mu.Unlock()
			ws, _ := cmd.ProcessState.Sys().(syscall.WaitStatus)
			reply(spawnReply{ID: id, Exited: true, Status: int(ws)})
		}(req.ID)
	}
}

// spawnScoped starts cmd from a fresh OS thread that first enters a new
// Landlock domain made from the ruleset scope (-1: none, the kernel has no
// signal scoping), so the command starts in that domain. Go cannot run code
// between fork and exec, but a thread's domain is inherited by what it
// forks: the goroutine locks itself to its thread, restricts that thread
// alone, forks, and returns without unlocking, upon which the Go runtime
// ends the thread. Threads the runtime makes meanwhile come from its
// template thread, outside the new domain. Until the thread has ended — a
// few microseconds after the command started — the command could signal
// it; should it stop the server that way, the daemon notices and replaces
// the server (see Process.Wait).
func spawnScoped(cmd *exec.Cmd, scope int) error {
	done := make(chan error, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread dies with this goroutine
		if scope >= 0 {
			if err := ll.LandlockRestrictSelf(scope, 0); err != nil {
				done <- fmt.Errorf("sandbox set-up failed: landlock_restrict_self (signal scope): %w", err)
				return
			}
		}
		done <- cmd.Start()
	}()
	return <-done
}

func receivedFiles(oob []byte) []*os.File {
	msgs, err := unix.ParseSocketControlMessage(oob)
	if err != nil {
		return nil
	}
	var out []*os.File
	for _, m := range msgs {
		fds, err := unix.ParseUnixRights(&m)
		if err != nil {
			continue
		}
		for _, fd := range fds {
			unix.CloseOnExec(fd)
			out = append(out, os.NewFile(uintptr(fd), "fd"+strconv.Itoa(fd)))
		}
	}
	return out
}

func closeAll(files []*os.File) {
	for _, f := range files {
		f.Close()
	}
}

// zygote is the daemon's side of one spawn server.
type zygote struct {
	key    string // the policy it enforces (writable folders, network)
	conn   *net.UnixConn
	proc   *os.Process
	exited chan struct{} // closed once the server is reaped

	wmu     sync.Mutex
	mu      sync.Mutex
	nextID  uint64
	pending map[uint64]chan spawnReply
	dead    error // set when the server is gone
	done    chan struct{}

	// proxyLn is the proxy's listener the server made in its network
	// namespace (proxy mode), served by the session's proxy; closed with
	// the server.
	proxyLn net.Listener
}

// errSpawnFallback wraps every reason to run a command through the
// per-command helper instead: nothing was started.
var errSpawnFallback = errors.New("spawn server unavailable")

// NothingStarted reports whether err, from [Session.Spawn], means the
// command was not started, so the caller may run it another way.
func NothingStarted(err error) bool { return errors.Is(err, errSpawnFallback) }

// ErrServerFrozen is returned for a command whose spawn server stopped
// answering while it ran (stopped by a signal, traced, or wedged): the
// server has been killed, and the caller kills the command's group.
var ErrServerFrozen = errors.New("the sandbox's spawn server stopped answering while the command ran (a command stopped it, e.g. kill -STOP $PPID); " +
	"acpd killed the server and the command, and starts a new server for the next command")

// Every wait on the server is bounded, so a server that stops answering
// costs at most these, never the turn.
const (
	// zygoteCheckInterval is how often a wait looks whether the server
	// is stopped (SIGSTOP, ptrace): it then never answers.
	zygoteCheckInterval = 250 * time.Millisecond
	// spawnReplyTimeout bounds the wait for a started command's pid.
	spawnReplyTimeout = 10 * time.Second
	// exitReplyGrace is how long the server may take to report the exit
	// of a command the daemon killed (cancel, timeout): milliseconds on
	// an idle machine, generous for a loaded one. A stopped server is
	// found sooner, by its state.
	exitReplyGrace = 10 * time.Second
	// zygoteCloseTimeout is how long a closed server may take to exit
	// before it is killed.
	zygoteCloseTimeout = 2 * time.Second
)

// startZygote starts the server for plan's policy and waits until it has
// confined itself.
func startZygote(helper string, environ []string, plan Plan, ports *os.File) (*zygote, error) {
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("socketpair: %w", err)
	}
	mine, theirs := os.NewFile(uintptr(fds[0]), "spawn"), os.NewFile(uintptr(fds[1]), "spawn-server")
	defer theirs.Close()
	c, err := net.FileConn(mine)
	mine.Close()
	if err != nil {
		return nil, err
	}
	conn := c.(*net.UnixConn)
	args := append([]string{Subcommand, "--serve", "3"}, plan.confinementArgs(true)...)
	if plan.Proxy {
		ns, err := netNamespace()
		if err != nil {
			conn.Close()
			return nil, err
		}
		args = append(args, "--outer-net", ns)
	}
	if plan.Shm != "" {
		ns, err := mountNamespace()
		if err != nil {
			conn.Close()
			return nil, err
		}
		args = append(args, "--shm", plan.Shm, "--outer-ns", ns)
	}
	cmd := exec.Command(helper, args...)
	// The server's own environment holds no secret either: on a kernel
	// without signal scoping a root command shares its domain and could
	// read it.
	cmd.Env = environ
	cmd.ExtraFiles = []*os.File{theirs}
	if ports != nil && len(plan.DenyPorts) > 0 {
		cmd.ExtraFiles = append(cmd.ExtraFiles, ports)
		cmd.Args = append(cmd.Args[:2], append([]string{"--port-ruleset", "4"}, cmd.Args[2:]...)...)
	}
	// Its own group, so a signal to the daemon's group (Ctrl-C in a
	// terminal running acpd) is not delivered to it; it follows the
	// daemon through the death signal and its socket instead. Not a
	// session of its own: the commands it forks get theirs, so its
	// controlling terminal reaches none of them, and a new session costs
	// a scheduler group (autogroup) that every request would then cross.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGTERM}
	plan.Prepare(cmd)
	// The death signal fires when the daemon's thread that forked the
	// server exits. Go ends a thread only when a goroutine locked to it
	// returns without unlocking, which acpd's callers never do; and the
	// server exits on its socket's EOF anyway.
	if err := cmd.Start(); err != nil {
		conn.Close()
		return nil, fmt.Errorf("starting the sandbox helper %s: %w", helper, err)
	}
	z := &zygote{key: zygoteKey(plan), conn: conn, proc: cmd.Process, exited: make(chan struct{}),
		pending: map[uint64]chan spawnReply{}, done: make(chan struct{})}
	_ = conn.SetReadDeadline(time.Now().Add(zygoteStartTimeout))
	hello, files, err := z.readHello()
	_ = conn.SetReadDeadline(time.Time{})
	if err == nil && !hello.Ready {
		err = errors.New(hello.Err)
	}
	if err == nil && plan.Proxy {
		// The proxy's listener, made in the server's own network
		// namespace: without it the server's commands would have no
		// network at all, so the server is not used.
		if len(files) != 1 || hello.ProxyPort == 0 {
			err = fmt.Errorf("the spawn server sent no proxy listener (%d files)", len(files))
		} else {
			z.proxyLn, err = net.FileListener(files[0])
		}
	}
	closeAll(files)
	if err != nil {
		conn.Close()
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		return nil, err
	}
	go func() {
		_ = cmd.Wait()
		close(z.exited)
	}()
	go z.readLoop()
	return z, nil
}

func zygoteKey(p Plan) string {
	b, _ := json.Marshal([]any{p.Writable, p.DenyNetwork, p.Proxy, p.Shm, p.DenyRead, p.denyStamp, p.DenyPorts})
	return string(b)
}

// readHello reads the server's start-up answer and the files it carries.
func (z *zygote) readHello() (spawnReply, []*os.File, error) {
	buf := make([]byte, 4096)
	oob := make([]byte, unix.CmsgSpace(4))
	n, oobn, _, _, err := z.conn.ReadMsgUnix(buf, oob)
	if err != nil {
		return spawnReply{}, nil, err
	}
	files := receivedFiles(oob[:oobn])
	if n == 0 {
		closeAll(files)
		return spawnReply{}, nil, errors.New("the spawn server closed its socket")
	}
	var r spawnReply
	if err := json.Unmarshal(buf[:n], &r); err != nil {
		closeAll(files)
		return spawnReply{}, nil, fmt.Errorf("bad reply from the spawn server: %w", err)
	}
	return r, files, nil
}

func (z *zygote) read() (spawnReply, error) {
	buf := make([]byte, 4096)
	n, err := z.conn.Read(buf)
	if err != nil {
		return spawnReply{}, err
	}
	if n == 0 {
		return spawnReply{}, errors.New("the spawn server closed its socket")
	}
	var r spawnReply
	if err := json.Unmarshal(buf[:n], &r); err != nil {
		return spawnReply{}, fmt.Errorf("bad reply from the spawn server: %w", err)
	}
	return r, nil
}

func (z *zygote) readLoop() {
	var err error
	for {
		var r spawnReply
		if r, err = z.read(); err != nil {
			break
		}
		z.mu.Lock()
		ch := z.pending[r.ID]
		if r.Exited || r.Err != "" {
			delete(z.pending, r.ID)
		}
		z.mu.Unlock()
		if ch != nil {
			ch <- r
		}
	}
	z.mu.Lock()
	if z.dead == nil {
		z.dead = fmt.Errorf("%w: %v", errSpawnFallback, err)
	}
	for id, ch := range z.pending {
		close(ch)
		delete(z.pending, id)
	}
	z.mu.Unlock()
	close(z.done)
}

func (z *zygote) alive() bool {
	z.mu.Lock()
	defer z.mu.Unlock()
	return z.dead == nil
}

func (z *zygote) deadErr() error {
	z.mu.Lock()
	defer z.mu.Unlock()
	return z.dead
}

// stopped reports whether the server is stopped or traced, in which state
// it never answers, or is about to be. The daemon reads it from /proc: it
// does not need the server's cooperation, which is what is missing.
//
// A stop is not instant: kill -STOP leaves the signal pending on the
// process until one of its threads takes it, stops, and has the others
// stop as each gets to it — and on a busy machine one of them may first
// report a command's exit. So the server counts as stopped from the moment
// the SIGSTOP is sent: while it is pending, and once any thread (not only
// the main one, whose state /proc/pid/stat shows) has stopped. The pending
// set is read first: a thread takes the signal and stops under the lock
// that reading it takes, so a signal gone from it is seen in the threads'
// states read after. Otherwise a command sent after one that stopped the
// server would be sent to a server already stopping, and fail with
// ErrServerFrozen, instead of running on a new one.
func (z *zygote) stopped() bool {
	dir := "/proc/" + strconv.Itoa(z.proc.Pid)
	if stopPending(dir + "/status") {
		return true
	}
	tasks, err := os.ReadDir(dir + "/task")
	if err != nil {
		return false
	}
	for _, t := range tasks {
		if st, _ := statOf(dir + "/task/" + t.Name() + "/stat"); st == 'T' || st == 't' {
			return true
		}
	}
	return false
}

// stopPending reports whether the process whose /proc status file is at
// path has a SIGSTOP pending (ShdPnd, the signals sent to the process that
// no thread has taken yet: a hex mask, bit n-1 for signal n).
func stopPending(path string) bool {
	b, err := os.ReadFile(path)
	if err != nil {
		return false
	}
	for line := range strings.Lines(string(b)) {
		if hex, ok := strings.CutPrefix(line, "ShdPnd:"); ok {
			mask, err := strconv.ParseUint(strings.TrimSpace(hex), 16, 64)
			return err == nil && mask&(1<<(uint(syscall.SIGSTOP)-1)) != 0
		}
	}
	return false
}

// procState is the state letter and parent pid of process pid.
func procState(pid int) (state byte, ppid int) {
	return statOf("/proc/" + strconv.Itoa(pid) + "/stat")
}

// statOf is the state letter and parent pid in the /proc stat file at path
// ("pid (comm) S ppid …"; comm may hold spaces and ')').
func statOf(path string) (state byte, ppid int) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, 0
	}
	i := bytes.LastIndexByte(b, ')')
	if i < 0 || i+2 >= len(b) {
		return 0, 0
	}
	f := strings.Fields(string(b[i+2:]))
	if len(f) < 2 {
		return 0, 0
	}
	ppid, _ = strconv.Atoi(f[1])
	return f[0][0], ppid
}

// kill ends a server that cannot be trusted to answer any more, and the
// commands it started: SIGKILL works on a stopped process too, and each
// command leads its own group, which would otherwise run on unobserved
// (the server may have been stopped before it told the daemon a pid).
// Its pending waits end (their channels close) and later spawns fall
// back; the session starts a new server.
func (z *zygote) kill(why error) {
	z.mu.Lock()
	if z.dead == nil {
		z.dead = fmt.Errorf("%w: %w", errSpawnFallback, why)
	}
	z.mu.Unlock()
	for _, pid := range childrenOf(z.proc.Pid) {
		_ = syscall.Kill(-pid, syscall.SIGKILL)
	}
	_ = z.proc.Signal(syscall.SIGKILL)
	z.conn.Close()
	if z.proxyLn != nil {
		z.proxyLn.Close()
	}
}

// KillHolders kills the process groups of the other processes that hold
// the pipe f is an end of: those of a command whose server died before
// reporting its pid, found through the pipe they write to (the server
// itself must be dead or killed already: it held the pipe for a moment).
// /proc is read as the daemon's user, which is the commands' user.
func KillHolders(f *os.File) {
	var st syscall.Stat_t
	if err := syscall.Fstat(int(f.Fd()), &st); err != nil {
		return
	}
	want := fmt.Sprintf("pipe:[%d]", st.Ino)
	self := os.Getpid()
	procs, err := os.ReadDir("/proc")
	if err != nil {
		return
	}
	for _, p := range procs {
		pid, err := strconv.Atoi(p.Name())
		if err != nil || pid == self {
			continue
		}
		fdDir := "/proc/" + p.Name() + "/fd"
		fds, err := os.ReadDir(fdDir)
		if err != nil {
			continue
		}
		for _, fd := range fds {
			if link, err := os.Readlink(fdDir + "/" + fd.Name()); err == nil && link == want {
				if pgid, err := syscall.Getpgid(pid); err == nil && pgid != syscall.Getpgrp() {
					_ = syscall.Kill(-pgid, syscall.SIGKILL)
				}
				_ = syscall.Kill(pid, syscall.SIGKILL)
				break
			}
		}
	}
}

// childrenOf lists the processes whose parent is pid, from /proc.
func childrenOf(pid int) []int {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	var out []int
	for _, e := range ents {
		child, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if st, ppid := procState(child); st != 0 && ppid == pid {
			out = append(out, child)
		}
	}
	return out
}

// close asks the server to exit (EOF on its socket, upon which it kills
// the commands it still runs) and kills it if it does not.
func (z *zygote) close() {
	z.conn.Close()
	if z.proxyLn != nil {
		z.proxyLn.Close()
	}
	<-z.done
	select {
	case <-z.exited:
	case <-time.After(zygoteCloseTimeout):
		_ = z.proc.Signal(syscall.SIGKILL)
	}
}

// Process is a command the spawn server started.
type Process struct {
	// Pid is the command's pid, which is also its process group.
	Pid     int
	z       *zygote
	replies chan spawnReply
}

// Wait returns the command's wait status. It does not depend on the server
// alone: when the server dies before reporting it, Wait says so; when the
// server is stopped, or does not report the exit of a command killed after
// ctx ended within exitReplyGrace, the server is killed and Wait returns
// ErrServerFrozen. In every error case the caller kills the command's
// group.
func (p *Process) Wait(ctx context.Context) (syscall.WaitStatus, error) {
	tick := time.NewTicker(zygoteCheckInterval)
	defer tick.Stop()
	ended := ctx.Done()
	var grace <-chan time.Time
	for {
		select {
		case r, ok := <-p.replies:
			if !ok {
				if errors.Is(p.z.deadErr(), ErrServerFrozen) {
					return 0, ErrServerFrozen
				}
				return 0, errors.New("the sandbox's spawn server died while the command ran")
			}
			return syscall.WaitStatus(r.Status), nil
		case <-tick.C:
			if p.z.stopped() {
				p.z.kill(ErrServerFrozen)
				return 0, ErrServerFrozen
			}
		case <-ended:
			ended = nil
			grace = time.After(exitReplyGrace)
		case <-grace:
			p.z.kill(ErrServerFrozen)
			return 0, ErrServerFrozen
		}
	}
}

// spawn asks the server to start argv with stdio as its stdin, stdout and
// stderr. An error wrapping errSpawnFallback means nothing was started;
// any other means the command may have started and its fate is unknown
// (the server was killed).
func (z *zygote) spawn(ctx context.Context, argv, env []string, dir string, stdio [3]*os.File) (*Process, error) {
	z.mu.Lock()
	if z.dead != nil {
		z.mu.Unlock()
		return nil, z.dead
	}
	z.nextID++
	id := z.nextID
	ch := make(chan spawnReply, 2)
	z.pending[id] = ch
	z.mu.Unlock()
	forget := func() {
		z.mu.Lock()
		delete(z.pending, id)
		z.mu.Unlock()
	}
	b, err := json.Marshal(spawnRequest{ID: id, Argv: argv, Env: env, Dir: dir})
	if err != nil || len(b) > maxSpawnMessage {
		forget()
		return nil, fmt.Errorf("%w: request of %d bytes", errSpawnFallback, len(b))
	}
	fds := make([]int, 3)
	for i, f := range stdio {
		fds[i] = int(f.Fd())
	}
	z.wmu.Lock()
	_, _, err = z.conn.WriteMsgUnix(b, unix.UnixRights(fds...), nil)
	z.wmu.Unlock()
	runtime.KeepAlive(stdio)
	if err != nil {
		forget()
		return nil, fmt.Errorf("%w: %v", errSpawnFallback, err)
	}
	timeout := time.NewTimer(spawnReplyTimeout)
	defer timeout.Stop()
	tick := time.NewTicker(zygoteCheckInterval)
	defer tick.Stop()
	for {
		select {
		case r, ok := <-ch:
			switch {
			case !ok:
				// Gone after it read the request: it may have started the
				// command and died before saying so. Running it again
				// would run it twice; what it started is found through
				// its output pipe.
				KillHolders(stdio[1])
				return nil, fmt.Errorf("the sandbox's spawn server died while starting the command (%v); it may have started", z.deadErr())
			case r.Err != "":
				return nil, fmt.Errorf("%w: %s", errSpawnFallback, r.Err)
			}
			if st, ppid := procState(r.Pid); st != 0 && st != 'Z' && st != 'X' && ppid != 0 && ppid != z.proc.Pid {
				// A live process that is not the server's child: never
				// kill that group. (An exiting one shows parent 0.)
				z.kill(fmt.Errorf("it reported pid %d, which is not its child", r.Pid))
				return nil, fmt.Errorf("the sandbox's spawn server reported a process that is not its own (pid %d, parent %d); it was killed", r.Pid, ppid)
			}
			return &Process{Pid: r.Pid, z: z, replies: ch}, nil
		case <-ctx.Done():
			// Sent: the server may start it yet. Kill it when it does.
			go func() {
				if r, ok := <-ch; ok && r.Pid > 0 {
					_ = syscall.Kill(-r.Pid, syscall.SIGKILL)
				}
			}()
			return nil, ctx.Err()
		case <-tick.C:
			if z.stopped() {
				z.kill(ErrServerFrozen)
				KillHolders(stdio[1])
				return nil, ErrServerFrozen
			}
		case <-timeout.C:
			z.kill(fmt.Errorf("no answer to a spawn request within %s", spawnReplyTimeout))
			KillHolders(stdio[1])
			return nil, fmt.Errorf("the sandbox's spawn server did not answer within %s; it was killed", spawnReplyTimeout)
		}
	}
}

// maxZygoteFailures is how many spawn servers a session starts (or loses)
// before it stops trying and uses the per-command helper for good.
const maxZygoteFailures = 3

// Spawn starts a confined plan's command (plan.Command) through the
// session's spawn server, starting the server at the first call or when
// the policy changed (a writable folder appeared). stdio are the command's
// stdin, stdout and stderr; the caller closes its copies. An error for
// which NothingStarted holds means the caller may run plan.Argv (the
// per-command helper) instead; any other error means the command's fate is
// unknown and it must not be run again.
func (s *Session) Spawn(ctx context.Context, plan Plan, env []string, dir string, stdio [3]*os.File) (*Process, error) {
	if !plan.Confined || len(plan.Command) == 0 || s.p.Helper == "" || s.p.NoSpawnServer {
		return nil, errSpawnFallback
	}
	z, err := s.zygote(plan)
	if err != nil {
		return nil, err
	}
	p, err := z.spawn(ctx, plan.Command, env, dir, stdio)
	if err != nil && !z.alive() {
		s.zmu.Lock()
		if s.zy == z {
			s.zy = nil
			s.zfails++
		}
		s.zmu.Unlock()
	}
	return p, err
}
func (s *Session) zygote(plan Plan) (*zygote, error) {
	s.zmu.Lock()
	defer s.zmu.Unlock()
	if s.zclosed || s.zfails >= maxZygoteFailures {
		return nil, errSpawnFallback
	}
	key := zygoteKey(plan)
	if z := s.zy; z != nil {
		if z.key == key && z.alive() {
			if !z.stopped() {
				return z, nil
			}
			// Stopped between commands (or stopping: by the command
			// before, which ended first): nothing of this command was
			// sent to it, so it is replaced as a dead one is.
			z.kill(ErrServerFrozen)
		}
		s.zy = nil
		if !z.alive() {
			s.zfails++
		}
		go z.close()
		if s.zfails >= maxZygoteFailures {
			return nil, errSpawnFallback
		}
	}
	var ports *os.File
	if len(plan.DenyPorts) > 0 {
		ports = s.p.portRulesetFile()
	}
	z, err := startZygote(s.p.Helper, s.CommandEnv(os.Environ()), plan, ports)
	if err != nil {
		s.zfails++
		return nil, fmt.Errorf("%w: %v", errSpawnFallback, err)
	}
	if z.proxyLn != nil {
		if px := s.netProxy(); px != nil {
			px.Serve(z.proxyLn)
		} else {
			// No proxy to serve: the commands' connections are refused.
			z.proxyLn.Close()
		}
	}
	s.zy = z
	return z, nil
}

// closeZygote stops the session's spawn server (which kills the commands
// it still runs) and keeps later Spawns on the per-command helper.
func (s *Session) closeZygote() {
	s.zmu.Lock()
	z := s.zy
	s.zy, s.zclosed = nil, true
	s.zmu.Unlock()
	if z != nil {
		z.close()
	}
}

// ServerPid is the pid of the session's spawn server, 0 when it has none
// (not started yet, gone, or not used).
func (s *Session) ServerPid() int {
	s.zmu.Lock()
	defer s.zmu.Unlock()
	if s.zy == nil || !s.zy.alive() {
		return 0
	}
	return s.zy.proc.Pid
}
