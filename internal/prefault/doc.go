// Package prefault maps, in a few system calls, the memory acpd's start-up
// is about to touch page by page: imported for its init only, by the acpd
// command and nothing else.
//
// Each first touch of a page costs a page fault. On most machines that is
// well under a microsecond and this package does nothing worth measuring,
// but under some hypervisors a fault costs 10-20 µs, and starting acpd and
// answering initialize touches some 550 pages (a trivial Go program about
// 180): most of the time an editor waits for acpd was faults. Asking the
// kernel to map the pages in bulk (madvise MADV_POPULATE_READ and
// MADV_POPULATE_WRITE, Linux 5.14) costs about 0.1 µs per page of the
// binary and 1 µs per page of heap instead.
//
// It runs as early as a package init can: it imports only syscall, so the
// linker's init order (packages in import-path order as their dependencies
// are done) runs it right after syscall's, before the os package. The
// runtime's own start and the dozen standard-library inits before it still
// fault page by page.
//
// What it maps, once per process:
//   - the binary's code and read-only data (about 14 MB here, but the page
//     cache's pages only, no memory of its own): start-up runs code from
//     most of it, about 90 read faults of 16 pages each.
//   - the first 2 MiB of the Go heap from its randomised start: start-up's
//     allocations, goroutine stacks included, land there. Pages the process
//     never uses are resident anyway, at most 2 MiB once per process, which
//     the runtime's scavenger may return later; a served daemon pays it once
//     for all its sessions.
//
// acpd's sandbox helper (HelperSubcommand) maps nothing: one runs per
// session that runs a confined command (or per command), and its start-up is
// not what an editor waits for.
//
// Building with -tags noprefault leaves it out, to measure what it saves
// (an environment switch would have to be read before the heap is mapped,
// and reading the environment builds a map there). Other systems, and
// kernels without MADV_POPULATE_*, get nothing.
package prefault

// HelperSubcommand is argv[1] of acpd's sandbox helper, which this package
// leaves alone (the sandbox package's Subcommand; a test in cmd/acpd holds
// the two equal, so this package imports nothing of acpd's).
const HelperSubcommand = "__sandbox-exec"
