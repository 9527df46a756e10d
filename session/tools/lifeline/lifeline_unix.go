//go:build unix

package lifeline

import (
	"bufio"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"strings"
	"sync"
	"syscall"
)

// maxStarts bounds how many watchers one acpd process starts: a command
// that kills the watcher each time it appears would otherwise have acpd
// start one after each.
const maxStarts = 16

var w = &watcher{groups: map[int]struct{}{}}

// watcher is acpd's side: the pipe to the watcher process and the groups
// listed with it.
type watcher struct {
	mu      sync.Mutex
	enabled bool   // Enable was called
	exe     string // the binary that serves Subcommand; "" until the first Watch
	pipe    *os.File
	proc    *os.Process
	groups  map[int]struct{}
	starts  int
	warned  bool
}

// Enable lets this process start a watcher: exe (this process's own binary)
// serves Subcommand. Package sandbox/helper calls it from the init that
// serves the hidden subcommands, so only a binary that can be a watcher
// ever starts one as its own — never a test binary that would run its
// tests instead. Without it, Watch does nothing. It only records the
// permission: finding the binary (a readlink of /proc/self/exe) waits for
// the first command, as Enable runs in package initialization on every
// start of acpd.
func Enable() {
	w.mu.Lock()
	w.enabled = true
	w.mu.Unlock()
}

// Watch lists the process group pgid (a command just started, leading its
// own group) with the watcher, starting the watcher if there is none. The
// returned release takes it off the list; call it once the group has been
// killed or has ended. A watcher that cannot be started costs the
// protection, never the command: acpd logs it once.
func Watch(pgid int) (release func()) {
	if pgid <= 1 {
		return func() {}
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.enabled {
		return func() {}
	}
	if w.exe == "" {
		exe, err := os.Executable()
		if err != nil {
			w.enabled = false
			return func() {}
		}
		w.exe = exe
	}
	w.groups[pgid] = struct{}{}
	w.send("+", pgid)
	return func() {
		w.mu.Lock()
		defer w.mu.Unlock()
		if _, ok := w.groups[pgid]; !ok {
			return
		}
		delete(w.groups, pgid)
		if w.pipe != nil {
			_ = w.write("-" + strconv.Itoa(pgid) + "\n")
		}
	}
}

// send tells the watcher about pgid, starting one (which is then told every
// listed group) when there is none or the write finds it gone. w.mu held.
func (w *watcher) send(op string, pgid int) {
	if w.pipe != nil && w.write(op+strconv.Itoa(pgid)+"\n") == nil {
		return
	}
	w.restart()
}

// restart starts a new watcher and lists every group with it. w.mu held.
func (w *watcher) restart() {
	w.drop()
	if w.starts >= maxStarts {
		w.warn(fmt.Errorf("%d watchers started already", w.starts))
		return
	}
	w.starts++
	r, pw, err := os.Pipe()
	if err != nil {
		w.warn(err)
		return
	}
	cmd := exec.Command(w.exe, Subcommand)
	cmd.ExtraFiles = []*os.File{r}
	cmd.Stderr = os.Stderr
	// Its own group: Ctrl-C in the terminal running acpd reaches acpd's
	// group, and acpd cleans up after it; the watcher only follows the pipe.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	err = cmd.Start()
	r.Close()
	if err != nil {
		pw.Close()
		w.warn(err)
		return
	}
	w.pipe, w.proc = pw, cmd.Process
	var b strings.Builder
	for pg := range w.groups {
		fmt.Fprintf(&b, "+%d\n", pg)
	}
	if b.Len() > 0 && w.write(b.String()) != nil {
		w.drop()
		w.warn(fmt.Errorf("the watcher exited at once"))
		return
	}
	go func(p *os.Process, pipe *os.File) {
		_, _ = p.Wait()
		// Gone while acpd lives (a command killed it): list the running
		// groups with a new one now, not at the next command.
		w.mu.Lock()
		defer w.mu.Unlock()
		if w.pipe == pipe {
			w.drop()
			if len(w.groups) > 0 {
				w.restart()
			}
		}
	}(cmd.Process, pw)
}

// write sends one or more lines; a watcher that is gone fails it with
// EPIPE (Go ignores SIGPIPE on descriptors other than stdout and stderr).
func (w *watcher) write(s string) error {
	_, err := w.pipe.WriteString(s)
	return err
}

// drop forgets the current watcher. Closing the pipe makes a live one kill
// the groups it lists, so it is only dropped once it is gone or unusable.
func (w *watcher) drop() {
	if w.pipe != nil {
		w.pipe.Close()
		w.pipe, w.proc = nil, nil
	}
}

func (w *watcher) warn(err error) {
	if w.warned {
		return
	}
	w.warned = true
	slog.Warn("cannot start the command watcher: a shell command running when acpd is killed (kill -9) may keep running", "err", err.Error())
}

// Main is the watcher process: it reads "+PGID" and "-PGID" lines from file
// descriptor 3 and, at EOF, kills every group still listed. A termination
// signal does the same: whoever stops the watcher stops the commands it
// guards rather than leaving them unguarded.
func Main(args []string) int {
	if len(args) != 0 {
		fmt.Fprintln(os.Stderr, "acpd "+Subcommand+": takes no arguments")
		return 2
	}
	in := os.NewFile(3, "lifeline")
	syscall.CloseOnExec(3)
	var (
		mu     sync.Mutex
		groups = map[int]struct{}{}
	)
	killAll := func() {
		mu.Lock()
		defer mu.Unlock()
		for pg := range groups {
			_ = syscall.Kill(-pg, syscall.SIGKILL)
		}
	}
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP)
	go func() {
		<-sig
		killAll()
		os.Exit(0)
	}()
	sc := bufio.NewScanner(in)
	for sc.Scan() {
		line := sc.Text()
		if len(line) < 2 {
			continue
		}
		pg, err := strconv.Atoi(line[1:])
		// Never group 0 (the watcher's own) or 1, nor a negative one:
		// kill(-pg) of those would mean something else entirely.
		if err != nil || pg <= 1 {
			continue
		}
		mu.Lock()
		switch line[0] {
		case '+':
			groups[pg] = struct{}{}
		case '-':
			delete(groups, pg)
		}
		mu.Unlock()
	}
	killAll()
	return 0
}
