package policy

import (
	"fmt"
	"slices"
	"strconv"

	"github.com/acpd/acpd/session/rules"
)

// Report is a workspace's policy as `acpd permissions` shows it.
type Report struct {
	Workspace string `json:"workspace"`
	// Trusted: the user trusted the workspace's settings as they are.
	// TrustNeeded: they have allow rules or hooks waiting for trust.
	Trusted     bool `json:"trusted"`
	TrustNeeded bool `json:"trustNeeded"`
	// Files are the workspace's settings files found.
	Files    []string     `json:"projectFiles,omitempty"`
	Rules    []ListedRule `json:"rules"`
	Hooks    []ListedHook `json:"hooks"`
	Ignored  []string     `json:"ignored,omitempty"`
	Problems []string     `json:"problems,omitempty"`
}

// ListedRule is one rule, numbered as acpd permissions rm takes it.
type ListedRule struct {
	N      int    `json:"n"`
	Kind   string `json:"kind"`
	Rule   string `json:"rule"`
	Scope  string `json:"scope"`
	Source string `json:"source"`
	// Pending: a project allow rule that waits for trust.
	Pending bool   `json:"pending,omitempty"`
	Warning string `json:"warning,omitempty"`
}

// ListedHook is one hook.
type ListedHook struct {
	Event   string `json:"event"`
	Matcher string `json:"matcher,omitempty"`
	Command string `json:"command"`
	Timeout string `json:"timeout,omitempty"`
	Source  string `json:"source"`
	Pending bool   `json:"pending,omitempty"`
}

// Report lists the workspace's rules in force (and a project's waiting
// for trust), each with the file it came from, and its hooks.
func (w *Workspace) Report() Report {
	w.Invalidate()
	snap := w.Snapshot()
	r := Report{Workspace: w.Root, Trusted: snap.Trusted, Problems: snap.Problems, Rules: []ListedRule{}, Hooks: []ListedHook{}}
	p := snap.Project
	r.Files, r.Ignored = p.Files, p.Ignored
	r.TrustNeeded = p.Widens() && !snap.Trusted
	add := func(rl rules.Rule, pending bool) {
		r.Rules = append(r.Rules, ListedRule{N: len(r.Rules) + 1, Kind: rl.Kind.String(), Rule: rl.Text, Scope: string(rl.Source.Scope),
			Source: rl.Source.String(), Pending: pending, Warning: rl.Warning})
	}
	for _, rl := range snap.Rules {
		add(rl, false)
	}
	if !snap.Trusted {
		for _, rl := range p.Allow {
			add(rl, true)
		}
	}
	for _, h := range snap.Hooks {
		r.Hooks = append(r.Hooks, listedHook(h.Event, h.Matcher, h.Command, h.Timeout.String(), h.Source.File, false))
	}
	if !snap.Trusted {
		for _, h := range p.Hooks {
			r.Hooks = append(r.Hooks, listedHook(h.Event, h.Matcher, h.Command, h.Timeout.String(), h.Source.File, true))
		}
	}
	return r
}

func listedHook(event, matcher, command, timeout, source string, pending bool) ListedHook {
	if timeout == "0s" {
		timeout = ""
	}
	return ListedHook{Event: event, Matcher: matcher, Command: command, Timeout: timeout, Source: source, Pending: pending}
}

// RemoveRule takes a rule out of the file acpd keeps it in: given as
// written, or by its number in Report. A rule of another file (the
// configuration, a project's settings) is the user's to edit there: the
// error names the file.
func (w *Workspace) RemoveRule(which string) (ListedRule, error) {
	rep := w.Report()
	var matches []ListedRule
	if n, err := strconv.Atoi(which); err == nil {
		if n < 1 || n > len(rep.Rules) {
			return ListedRule{}, fmt.Errorf("there is no rule %d; acpd permissions lists %d", n, len(rep.Rules))
		}
		matches = []ListedRule{rep.Rules[n-1]}
	} else {
		for _, lr := range rep.Rules {
			if lr.Rule == which {
				matches = append(matches, lr)
			}
		}
	}
	if len(matches) == 0 {
		return ListedRule{}, fmt.Errorf("no rule %q is in force for %s (acpd permissions lists them)", which, w.Root)
	}
	own := []string{w.RulesFile(), w.UserRulesFile()}
	for _, m := range matches {
		if m.Source == "" || !slices.Contains(own, m.Source) {
			continue
		}
		k, _ := rules.ParseKind(m.Kind)
		ok, err := RemoveRule(m.Source, k, m.Rule)
		if err != nil {
			return m, err
		}
		if ok {
			w.Invalidate()
			return m, nil
		}
	}
	return matches[0], fmt.Errorf("the rule %q is in %s, which acpd does not write: edit that file to remove it", matches[0].Rule, matches[0].Source)
}
