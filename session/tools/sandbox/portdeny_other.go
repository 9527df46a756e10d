//go:build !linux

package sandbox

import "os"

// portRules holds nothing off Linux, where nothing is confined.
type portRules struct{ ports []uint16 }

// DenyConnect does nothing off Linux.
func (p *Policy) DenyConnect(...uint16) {}

func (p *Policy) deniedPorts() []uint16 { return nil }

func (p *Policy) portRulesetFile() *os.File { return nil }
