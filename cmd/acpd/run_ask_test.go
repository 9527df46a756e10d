package main

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/acpd/acpd/session/model/modeltest"
)

// acpd run answers the model's ask_user_question from --answer, one per
// question in order (a choice by its number, a multi-select by a list);
// without an --answer left the question fails, the model is told why and
// stderr says to pass --answer, and the turn still ends normally.
func TestRunCmd_AnswersQuestions(t *testing.T) {
	t.Parallel()
	ask := `{"questions":[` +
		`{"question":"Which database?","header":"Database","options":[{"label":"Postgres"},{"label":"SQLite"}]},` +
		`{"question":"Which checks?","header":"Checks","multiSelect":true,"options":[{"label":"lint"},{"label":"test"},{"label":"race"}]}]}`
	for _, tc := range []struct {
		name    string
		answers []string
		tool    string
		stderr  string
	}{
		{"answered", []string{"2", "lint, race"}, "1. Which database?\n   Answer: SQLite\n2. Which checks?\n   Answer: lint, race\n", `acpd run: answered "Which database?" with "SQLite" (--answer)`},
		{"too few answers", []string{"Postgres"}, `no --answer is left for the question \"Which checks?\"`, `pass one --answer per question the model asks`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			srv := modeltest.NewServer(t,
				modeltest.Response{ToolCalls: []modeltest.ToolCall{{ID: "q1", Name: "ask_user_question", Arguments: ask}}},
				modeltest.Response{Text: "Thanks."},
			)
			e := newRunEnv(t)
			e.env = append(e.env, "OPENAI_API_KEY=test-key")
			args := []string{"run", "--provider", "openai", "--base-url", srv.BaseURL(), "--model", "m1", "--cwd", e.ws}
			for _, a := range tc.answers {
				args = append(args, "--answer", a)
			}
			o := e.run(t, "", append(args, "set it up")...)
			require.Equal(t, 0, o.code, o.stderr)
			assert.Contains(t, o.stderr, tc.stderr)
			reqs := srv.Requests()
			require.Len(t, reqs, 2)
			var offered []string
			for _, tl := range reqs[0].Tools {
				offered = append(offered, tl.Function.Name)
			}
			assert.Contains(t, offered, "ask_user_question", "acpd run can answer questions")
			var tool string
			for _, m := range reqs[1].Messages {
				if m.Role == "tool" {
					tool = m.Text()
				}
			}
			assert.True(t, strings.Contains(tool, strings.ReplaceAll(tc.tool, `\"`, `"`)), "tool result %q", tool)
		})
	}
}
