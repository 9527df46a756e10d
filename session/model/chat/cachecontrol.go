package chat

import (
	"net/url"
	"strings"
)

// Cache-control modes (model.cacheControl).
const (
	CacheControlAuto = "auto"
	CacheControlOn   = "on"
	CacheControlOff  = "off"
)

// CacheMarkers reports whether a request to baseURL for modelID carries
// cache_control markers under mode. "auto" turns them on where the
// provider only caches what is marked: DashScope's hosts (qwen-code marks
// its requests there too, openai-stream.md §2), and Anthropic's models
// behind OpenRouter. Providers that cache every prefix on their own
// (OpenAI, DeepSeek, OpenRouter's other models) get no markers: a strict
// server may refuse the unknown field.
func CacheMarkers(mode, baseURL, modelID string) bool {
	switch mode {
	case CacheControlOn:
		return true
	case CacheControlOff:
		return false
	}
	return isDashScope(baseURL) || (host(baseURL) == "openrouter.ai" && isClaude(modelID))
}

func host(baseURL string) string {
	u, err := url.Parse(baseURL)
	if err != nil {
		return ""
	}
	return strings.ToLower(u.Hostname())
}

// isDashScope: dashscope.aliyuncs.com, dashscope-intl.aliyuncs.com and the
// Model Studio token-plan hosts (token-plan.<region>.maas.aliyuncs.com).
func isDashScope(baseURL string) bool {
	h := host(baseURL)
	return strings.HasSuffix(h, ".aliyuncs.com") && (strings.HasPrefix(h, "dashscope") || strings.Contains(h, ".maas."))
}

func isClaude(modelID string) bool {
	m := strings.ToLower(modelID)
	return strings.HasPrefix(m, "anthropic/") || strings.Contains(m, "claude")
}

// cacheControl is the marker: {"type": "ephemeral"}.
type cacheControl struct {
	Type string `json:"type"`
}

var ephemeral = &cacheControl{Type: "ephemeral"}

// marked returns cm with a cache_control marker on its content, which
// becomes a list of parts (the only place the field is accepted); nil when
// cm has no text to mark (an assistant message holding only tool calls).
func marked(cm chatMessage) *chatMessage {
	switch c := cm.Content.(type) {
	case string:
		cm.Content = []chatPart{{Type: "text", Text: c, CacheControl: ephemeral}}
	case []chatPart:
		parts := append([]chatPart(nil), c...)
		parts[len(parts)-1].CacheControl = ephemeral
		cm.Content = parts
	default:
		return nil
	}
	return &cm
}
