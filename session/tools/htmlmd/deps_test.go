package htmlmd

import (
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// TestDaemonLeavesOutHTMLParser fails if acpd links x/net/html or the
// x/text charset index again: their init functions (a 2,231-entry entity
// map, the language tables) cost every acpd process about 0.3 ms before
// main, whether or not it ever fetches a page.
func TestDaemonLeavesOutHTMLParser(t *testing.T) {
	if testing.Short() {
		t.Skip("runs go list")
	}
	out, err := exec.Command(filepath.Join(runtime.GOROOT(), "bin", "go"), "list", "-deps",
		"github.com/acpd/acpd/cmd/acpd").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	for _, dep := range strings.Fields(string(out)) {
		switch dep {
		case "golang.org/x/net/html", "golang.org/x/net/html/charset",
			"golang.org/x/text/encoding/htmlindex", "golang.org/x/text/language":
			t.Errorf("acpd depends on %s again", dep)
		}
	}
}
