package acp_test

import (
	"testing"

	"github.com/acpd/acpd/acp/acptest"
)

func TestConn_Robustness(t *testing.T) {
	acptest.RunRobustness(t, startOSPipe)
}
