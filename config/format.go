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
		if table == modelProvidersTable {
			if len(cfg.Providers) == 0 {
				fmt.Fprintf(&b, "# [%s] is empty  # default\n", table)
				continue
			}
			fmt.Fprintf(&b, "[%s]\n", table)
			for _, p := range cfg.Providers {
				f := providerField(p.ID)
				lit, _ := f.encode(&cfg)
				fmt.Fprintf(&b, "%s = %s  # %s\n", quoteKey(p.ID), lit, src.Of(f.key()))
				if p.APIKeyEnv != "" {
					if p.APIKey != "" {
						fmt.Fprintf(&b, "# %s apiKey = \"<redacted>\"  # env %s\n", p.ID, p.APIKeyEnv)
					} else {
						fmt.Fprintf(&b, "# %s apiKey is unset  # env %s is empty\n", p.ID, p.APIKeyEnv)
					}
				}
			}
			continue
		}
		fmt.Fprintf(&b, "[%s]\n", table)
		for _, f := range fields() {
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
			if f.key() == "tools.sandboxDenyRead" {
				b.WriteString("# built-in deny list (tools.sandboxDenyRead adds to it; \"!PATH\" removes an entry):\n")
				for _, p := range cfg.Tools.DenyReadDefaults {
					fmt.Fprintf(&b, "#   %s\n", p)
				}
			}
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

// quoteKey writes a TOML key bare when it can be.
func quoteKey(k string) string {
	for _, r := range k {
		if !(r == '_' || r == '-' || r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z') {
			return quote(k)
		}
	}
	if k == "" {
		return quote(k)
	}
	return k
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
