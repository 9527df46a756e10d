package config

import (
	"fmt"
	"strings"
)

// FormatTOML renders cfg as TOML with each value's source as a trailing
// comment, for `acpd config`. Unset optional values appear commented out.
// The API key is never shown, only whether it is set and where from.
func FormatTOML(cfg Config, src Sources) string {
	var b strings.Builder
	b.WriteString("# Effective acpd configuration. Each value is followed by its source:\n")
	b.WriteString("# default, file:line, env NAME or flag --name.\n")
	for i, table := range tables {
		if i > 0 {
			b.WriteByte('\n')
		}
		fmt.Fprintf(&b, "[%s]\n", table)
		for _, f := range fields {
			if f.table != table {
				continue
			}
			s := src.Of(f.key())
			lit, ok := f.encode(&cfg)
			if !ok {
				fmt.Fprintf(&b, "# %s is unset  # %s\n", f.name, s)
				continue
			}
			comment := s.String()
			if f.key() == "model.maxToolCallsPerTurn" {
				comment += " (" + capMode(cfg.Model) + ")"
			}
			fmt.Fprintf(&b, "%s = %s  # %s\n", f.name, lit, comment)
			if f.key() == "model.apiKeyEnv" {
				if cfg.Model.APIKey != "" {
					fmt.Fprintf(&b, "# apiKey = \"<redacted>\"  # %s\n", src.Of("model.apiKey"))
				} else {
					fmt.Fprintf(&b, "# apiKey is unset  # %s is empty\n", envLabel(cfg.Model.APIKeyEnv))
				}
			}
		}
	}
	return b.String()
}

func envLabel(name string) string {
	if name == "" {
		return "apiKeyEnv"
	}
	return "env " + name
}

func capMode(m ModelConfig) string {
	switch {
	case m.ToolCapDisabled():
		return "cap disabled"
	case m.MaxToolCallsPerTurnExplicit:
		return "hard cap"
	}
	return fmt.Sprintf("adaptive: soft %d, backstop %d", m.MaxToolCallsPerTurn, m.MaxToolCallsPerTurn*10)
}
