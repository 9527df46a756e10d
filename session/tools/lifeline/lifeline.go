// Package lifeline kills the commands acpd started when acpd dies, however
// it dies. Every shell command runs in a session (and process group) of its
// own, so that cancelling it kills everything it started; but a group of
// its own is also out of reach of anything the kernel does when acpd is
// killed with SIGKILL: acpd's own clean-up never runs, and a death signal
// (PR_SET_PDEATHSIG) would reach only the shell, not what the shell forked.
// The sandbox's spawn server covers the commands it starts; this package
// covers the ones acpd starts itself (sandbox off, a kernel without
// Landlock, the per-command helper).
//
// The first command starts one watcher for the whole acpd process: acpd's
// own binary re-executed with the hidden subcommand [Subcommand]. It holds
// the read end of a pipe whose only write end is acpd's (close-on-exec, so
// no other program inherits it). acpd writes the group of each command it
// starts, and again when the command is over; when the pipe reaches EOF —
// acpd exited, crashed or was killed, the kernel closes its files in every
// case — the watcher kills every group still listed and exits. One watcher
// serves every command of every session, so a command pays one short write
// each way, not a process start.
//
// Limits, said where they live: a command that leaves its process group
// (setsid, a daemonizing double fork) is out of reach here as it is of a
// cancel; a kill of acpd in the microseconds between a command's start and
// its registration leaves that command; a command may kill the watcher
// (unconfined commands can kill anything of the user's), and acpd then
// starts a new one and lists the running groups again. On Windows there
// are no process groups to kill and no watcher: a command outlives a
// forced kill of acpd there.
package lifeline

// Subcommand is the hidden acpd subcommand the watcher runs as:
//
//	acpd __lifeline
//
// with the pipe's read end as file descriptor 3.
const Subcommand = "__lifeline"
