package sandbox

import (
	"fmt"
	"strconv"
)

// helperArgs is the helper's command line.
type helperArgs struct {
	statusFD int
	// statusFile is where a set-up failure is written when there is no
	// status pipe (an editor terminal): a path in a folder the confined
	// command cannot write, so only the helper can create it.
	statusFile string
	serve      bool // --serve N: run the spawn server on socket N; no command
	serveFD    int
	rw         []string
	// exec, when given, are the only files the command may execute
	// (Landlock's EXECUTE right is then handled); otherwise execution is
	// not restricted.
	exec  []string
	noNet bool
	// shm is the session's folder to mount over /dev/shm (a private
	// /dev/shm, see shm_linux.go).
	shm string
	// outerNS is the daemon's mount namespace, which the spawn server
	// checks it is not in before it mounts.
	outerNS string
	// envDrop and envPass are the command's environment policy (see
	// EnvPolicy), applied by the helper to its own environment before it
	// execs the command.
	envDrop, envPass []string
	// denyRead are the paths the command may not read (see readdeny.go).
	denyRead []string
	// denyPorts are TCP ports the command may not connect to; portFD, when
	// ≥ 0, is a Landlock ruleset the daemon built for them.
	denyPorts []uint16
	portFD    int
	// proxy: the spawn server gives its commands the network only through
	// acpd's proxy (proxy_linux.go); outerNet is the daemon's network
	// namespace, which the server checks it is not in.
	proxy    bool
	outerNet string
	argv     []string
}

func parseHelperArgs(args []string) (helperArgs, error) {
	h := helperArgs{statusFD: -1, portFD: -1}
	for i := 0; i < len(args); i++ {
		switch a := args[i]; a {
		case "--":
			h.argv = args[i+1:]
			if len(h.argv) == 0 {
				return h, fmt.Errorf("no command after --")
			}
			return h, nil
		case "--no-net":
			h.noNet = true
		case "--proxy":
			h.proxy = true
		case "--rw", "--exec", "--status-file", "--status-fd", "--serve", "--shm", "--outer-ns", "--env-drop", "--env-pass", "--deny-read", "--deny-port", "--port-ruleset", "--outer-net":
			if i+1 >= len(args) {
				return h, fmt.Errorf("%s needs a value", a)
			}
			i++
			switch a {
			case "--rw":
				h.rw = append(h.rw, args[i])
				continue
			case "--exec":
				h.exec = append(h.exec, args[i])
				continue
			case "--status-file":
				h.statusFile = args[i]
				continue
			case "--shm":
				h.shm = args[i]
				continue
			case "--outer-ns":
				h.outerNS = args[i]
				continue
			case "--outer-net":
				h.outerNet = args[i]
				continue
			case "--env-drop":
				h.envDrop = append(h.envDrop, args[i])
				continue
			case "--env-pass":
				h.envPass = append(h.envPass, args[i])
				continue
			case "--deny-read":
				h.denyRead = append(h.denyRead, args[i])
				continue
			case "--deny-port":
				n, err := strconv.ParseUint(args[i], 10, 16)
				if err != nil || n == 0 {
					return h, fmt.Errorf("--deny-port %q: not a port", args[i])
				}
				h.denyPorts = append(h.denyPorts, uint16(n))
				continue
			}
			n, err := strconv.Atoi(args[i])
			if err != nil || n < 0 {
				return h, fmt.Errorf("%s %q: not a file descriptor", a, args[i])
			}
			switch a {
			case "--serve":
				h.serve, h.serveFD = true, n
				continue
			case "--port-ruleset":
				h.portFD = n
				continue
			}
			h.statusFD = n
		default:
			return h, fmt.Errorf("unknown argument %q", a)
		}
	}
	if h.proxy && (!h.serve || h.noNet) {
		return h, fmt.Errorf("--proxy is for the spawn server, with the network not denied")
	}
	if h.serve {
		return h, nil
	}
	return h, fmt.Errorf("missing -- before the command")
}
