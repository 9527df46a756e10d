package sandbox

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestEnvPolicy_Filter(t *testing.T) {
	e := EnvPolicy{Drop: []string{"LLM_ACCESS", "SERVE_BEARER"}, Pass: []string{"GH_TOKEN", "ACPD_KEEP"}}
	environ := []string{
		"PATH=/usr/bin", "HOME=/home/u", "LANG=C.UTF-8", "GOFLAGS=-mod=mod", "SSH_AUTH_SOCK=/run/agent",
		"OPENAI_API_KEY=sk-1", "ANTHROPIC_API_KEY=ak", "GEMINI_API_KEY=g", "GOOGLE_API_KEY=g2",
		"LLM_ACCESS=configured", "SERVE_BEARER=tok",
		"ACPD_SERVER_TOKEN=t", "ACPD_APPROVAL_MODE=yolo", "acpd_lower=x",
		"OTEL_EXPORTER_OTLP_HEADERS=a=b", "OTEL_EXPORTER_OTLP_TRACES_HEADERS=a=b", "OTEL_EXPORTER_OTLP_ENDPOINT=http://c",
		"GITHUB_TOKEN=ghp", "AWS_SECRET_ACCESS_KEY=s", "AWS_ACCESS_KEY_ID=i", "PGPASSWORD=p", "DB_PASSWD=p", "GOOGLE_APPLICATION_CREDENTIALS=/f", "npm_config__authToken=n",
		"GH_TOKEN=passed", "ACPD_KEEP=passed", "EMPTY=", "NOEQUALS",
		"TOKENIZERS_PARALLELISM=false", "KEYTIMEOUT=1", "GIT_CONFIG_KEY_0=core.pager", "GIT_CONFIG_KEY_X=x", "SECRETS_FILE=/s", "MY_KEYS=k",
	}
	kept, dropped := e.Filter(environ)
	assert.Equal(t, []string{
		"PATH=/usr/bin", "HOME=/home/u", "LANG=C.UTF-8", "GOFLAGS=-mod=mod", "SSH_AUTH_SOCK=/run/agent",
		"OTEL_EXPORTER_OTLP_ENDPOINT=http://c", "GH_TOKEN=passed", "ACPD_KEEP=passed", "EMPTY=", "NOEQUALS",
		"TOKENIZERS_PARALLELISM=false", "KEYTIMEOUT=1", "GIT_CONFIG_KEY_0=core.pager",
	}, kept)
	assert.Equal(t, []string{
		"OPENAI_API_KEY", "ANTHROPIC_API_KEY", "GEMINI_API_KEY", "GOOGLE_API_KEY", "LLM_ACCESS", "SERVE_BEARER",
		"ACPD_SERVER_TOKEN", "ACPD_APPROVAL_MODE", "acpd_lower",
		"OTEL_EXPORTER_OTLP_HEADERS", "OTEL_EXPORTER_OTLP_TRACES_HEADERS",
		"GITHUB_TOKEN", "AWS_SECRET_ACCESS_KEY", "AWS_ACCESS_KEY_ID", "PGPASSWORD", "DB_PASSWD", "GOOGLE_APPLICATION_CREDENTIALS", "npm_config__authToken",
		"GIT_CONFIG_KEY_X", "SECRETS_FILE", "MY_KEYS",
	}, dropped)

	var zero EnvPolicy
	kept, _ = zero.Filter([]string{"OPENAI_API_KEY=x", "LLM_ACCESS=y", "GH_TOKEN=z"})
	assert.Equal(t, []string{"LLM_ACCESS=y"}, kept, "without configuration: the built-in names and patterns")

	d := e.Describe()
	assert.Contains(t, d, "OPENAI_API_KEY, ANTHROPIC_API_KEY, GEMINI_API_KEY, GOOGLE_API_KEY, LLM_ACCESS, SERVE_BEARER")
	assert.Contains(t, d, "passed deliberately (tools.sandboxPassEnv): GH_TOKEN, ACPD_KEEP")
}

func TestParseHelperArgs_Env(t *testing.T) {
	h, err := parseHelperArgs([]string{"--env-drop", "A", "--env-pass", "B", "--env-drop", "C", "--", "sh"})
	assert.NoError(t, err)
	assert.Equal(t, []string{"A", "C"}, h.envDrop)
	assert.Equal(t, []string{"B"}, h.envPass)
}
