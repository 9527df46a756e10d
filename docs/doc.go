// Package docs holds acpd's user documentation, one Markdown page per
// subject, and the tests that keep it true: links and anchors resolve, the
// shell examples that call acpd run offline (or are marked as needing a real
// model), the TOML examples load, and the go test commands name tests and
// benchmarks that exist. The rules are written for contributors in
// architecture.md, section "Documentation".
package docs
