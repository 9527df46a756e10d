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
// It runs as early as a package init can: it imports nothing (its system
// calls are a few lines of assembly), so the linker's init order (packages
// in import-path order as their imports are done) runs it second, after
// only internal/cpu's FIPS shim; importing syscall had a dozen inits run
// before it (internal/godebug, sync, the base32/base64 tables...). The
// runtime's own start still faults page by page.
//
// What it maps, once per process:
//   - the binary's code and read-only data (about 14 MB here, but the page
//     cache's pages only, no memory of its own): start-up runs code from
//     most of it, about 90 read faults of 16 pages each.
//   - the first 2 MiB of the Go heap from its randomised start: start-up's
//     allocations, goroutine stacks included, land there. Each 2 MiB-aligned
//     stretch of it gets a transparent huge page where the kernel gives one
//     (MADV_HUGEPAGE, MADV_COLLAPSE for the pages the runtime touched
//     already), else small pages. Pages the process never uses are
//     resident anyway: up to 4 MiB once per process (the stretches reach
//     below the heap's start), which the runtime's scavenger may return
//     later; a served daemon pays it once for all its sessions.
//
// acpd's sandbox helper (HelperSubcommand) maps nothing: one runs per
// session that runs a confined command (or per command), and its start-up is
// not what an editor waits for.
//
// Building with -tags noprefault leaves it out, to measure what it saves
// (an environment switch would have to be read before the heap is mapped,
// and reading the environment builds a map there). Other systems and
// architectures than linux/amd64 and linux/arm64, and kernels without
// MADV_POPULATE_*, get nothing; kernels before 6.1 (no MADV_COLLAPSE) or
// with huge pages off get small pages.
package prefault

// HelperSubcommand is argv[1] of acpd's sandbox helper, which this package
// leaves alone (the sandbox package's Subcommand; a test in cmd/acpd holds
// the two equal, so this package imports nothing of acpd's).
const HelperSubcommand = "__sandbox-exec"
