package store

import "time"

// Rewind records that the conversation was rewound to before turn Turn
// (the Turn-th prompt of the session, counting every prompt recorded,
// rewound ones included). The records from that prompt up to the rewind
// stay in the transcript, for audit and for acpd stats, but are left out
// of the model's history (Messages) and of a replay (Updates): the
// session goes on as if they had never happened.
type Rewind struct {
	Turn int `json:"turn"`
	// Code is set when the workspace files were restored too.
	Code bool `json:"code,omitempty"`
}

// TurnInfo is one prompt turn of a transcript.
type TurnInfo struct {
	N       int // 1-based, counting every prompt recorded
	T       time.Time
	Prompt  string // the prompt's first line (TitleFromPrompt)
	Rewound bool
}

// Turns lists the session's prompt turns, rewound ones marked.
func (tr *Transcript) Turns() []TurnInfo {
	gone := tr.rewound()
	var out []TurnInfo
	for i := range tr.Records {
		r := &tr.Records[i]
		if r.Kind != KindUser || r.Parent != "" {
			continue
		}
		out = append(out, TurnInfo{N: len(out) + 1, T: r.T, Prompt: TitleFromPrompt(r.Prompt), Rewound: gone != nil && gone[i]})
	}
	return out
}

// rewound marks the records a rewind left out: from the prompt of the turn
// it names up to the rewind itself, which is left out too. Nil when the
// session was never rewound.
func (tr *Transcript) rewound() []bool {
	var gone []bool
	var starts []int // record index of each turn's prompt
	for i := range tr.Records {
		r := &tr.Records[i]
		switch {
		case r.Kind == KindUser && r.Parent == "":
			starts = append(starts, i)
		case r.Kind == KindRewind:
			if gone == nil {
				gone = make([]bool, len(tr.Records))
			}
			gone[i] = true
			if n := r.Rewind.Turn; n <= len(starts) {
				for j := starts[n-1]; j < i; j++ {
					gone[j] = true
				}
			}
		}
	}
	return gone
}
