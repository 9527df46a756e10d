package tools

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strings"
	"time"

	"github.com/acpd/acpd/acp"
	"github.com/acpd/acpd/session/tools/htmlconv"
	"github.com/acpd/acpd/session/tools/netguard"
)

// NameWebFetch fetches a URL for the model (qwen-code's web_fetch).
const NameWebFetch = "web_fetch"

// web_fetch's limits. qwen-code allows 60 s and 10 MiB; acpd keeps its
// download cap and halves the time, since a turn waits on it.
const (
	DefaultWebFetchTimeout  = 30 * time.Second
	DefaultWebFetchMaxBytes = 10 << 20
	// webFetchMaxRedirects bounds same-host redirects, as qwen-code.
	webFetchMaxRedirects = 10
	// webFetchMaxURL bounds the URL a model may ask for. Decision (the
	// reference has no limit): RFC 9110 asks servers to take at least 8000
	// octets, so a longer URL would most often be refused anyway, and the
	// URL goes whole into the tool call's title and permission request.
	webFetchMaxURL = 8192
)

// WebFetchOptions tune web_fetch; the zero value uses the defaults above
// and the system's resolver and dialer.
type WebFetchOptions struct {
	Timeout  time.Duration
	MaxBytes int64
	Hooks    netguard.Hooks
	// AllowPrivate reaches loopback and private network addresses without
	// asking (tools.webFetchAllowPrivate).
	AllowPrivate bool
}

func (o *WebFetchOptions) allowPrivate() bool { return o != nil && o.AllowPrivate }

var webFetchSpec = mustSpec(NameWebFetch, acp.KindFetch,
	"Fetches content from a URL (http or https) and returns it as text: HTML pages are converted to Markdown, "+
		"plain text and JSON are returned as they are; binary content is refused. A redirect to another host is "+
		"reported, not followed. Say in prompt what you want from the page; the content is returned for you to "+
		"apply it. Link-local and cloud-metadata addresses are never fetched; loopback and private network "+
		"addresses only when the user allows it.",
	`{
  "type": "object",
  "properties": {
    "url": {"type": "string", "minLength": 1, "description": "The URL to fetch (http or https)"},
    "prompt": {"type": "string", "minLength": 1, "description": "What to find or extract in the fetched content"}
  },
  "required": ["url", "prompt"]
}`)

type webFetchTool struct{ toolSpec }

func (t *webFetchTool) Build(env *Env, args json.RawMessage) (Call, error) {
	var a struct {
		URL    string `json:"url"`
		Prompt string `json:"prompt"`
	}
	if err := t.decode(args, &a); err != nil {
		return nil, err
	}
	if len(a.URL) > webFetchMaxURL {
		return nil, fmt.Errorf("invalid parameters for web_fetch: params/url: %d bytes long; at most %d are fetched", len(a.URL), webFetchMaxURL)
	}
	u, err := url.Parse(strings.TrimSpace(a.URL))
	if err != nil {
		return nil, fmt.Errorf("invalid parameters for web_fetch: params/url: %v", err)
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return nil, fmt.Errorf("invalid parameters for web_fetch: params/url: only http and https URLs are fetched, not %q", a.URL)
	}
	if u.Hostname() == "" {
		return nil, fmt.Errorf("invalid parameters for web_fetch: params/url: %q has no host", a.URL)
	}
	if u.User != nil {
		return nil, fmt.Errorf("invalid parameters for web_fetch: params/url: credentials in the URL are not sent")
	}
	if netguard.BlockedHost(u.Hostname()) {
		return nil, fmt.Errorf("web_fetch %s: %w", u.Redacted(), netguard.ErrBlockedAddress)
	}
	u.Fragment = ""
	c := &webFetchCall{u: u, prompt: a.Prompt}
	if env != nil {
		c.allowPrivate = env.WebFetch.allowPrivate()
	}
	return c, nil
}

type webFetchCall struct {
	u            *url.URL
	prompt       string
	allowPrivate bool
}

func (c *webFetchCall) Title() string { return "Fetch " + c.u.String() }

// Locations is empty: a URL is not a file in the workspace.
func (c *webFetchCall) Locations() []acp.ToolCallLocation { return nil }

// Confirmation asks in default, auto-edit and plan modes; "always allow"
// covers the host. A host known to be private (localhost, a private
// address literal) is asked about when the call connects, in every mode,
// so it is not asked about twice.
func (c *webFetchCall) Confirmation() Confirmation {
	kind := ConfirmFetch
	if !c.allowPrivate && netguard.PrivateHost(c.u.Hostname()) {
		kind = ConfirmPrivateNetwork
	}
	return Confirmation{
		Kind:    kind,
		Label:   strings.ToLower(c.u.Hostname()),
		Content: []acp.ToolCallContent{acp.TextContent(fmt.Sprintf("Fetch %s\n\n%s", c.u, c.prompt))},
	}
}

// permitter asks the user, through env, to let the call reach host's
// private addresses.
func (c *webFetchCall) permitter(env *Env) func(ctx context.Context, host string, addrs []netip.Addr) (bool, error) {
	if env.Permit == nil {
		return nil
	}
	return func(ctx context.Context, host string, addrs []netip.Addr) (bool, error) {
		text := fmt.Sprintf("Fetch %s\n\n%s is %s: not the internet, but this machine or a private network. "+
			"acpd asks before every fetch from such an address, in every mode "+
			"(tools.webFetchAllowPrivate = true allows them).\n\n%s", c.u, host, netguard.DescribeAddrs(addrs), c.prompt)
		return env.Permit(ctx, Confirmation{
			Kind:    ConfirmPrivateNetwork,
			Label:   strings.ToLower(host),
			Content: []acp.ToolCallContent{acp.TextContent(text)},
		})
	}
}

func (c *webFetchCall) Execute(ctx context.Context, env *Env) Result {
	o := env.WebFetch
	if o == nil {
		o = &WebFetchOptions{}
	}
	timeout, maxBytes := o.Timeout, o.MaxBytes
	if timeout <= 0 {
		timeout = DefaultWebFetchTimeout
	}
	if maxBytes <= 0 {
		maxBytes = DefaultWebFetchMaxBytes
	}
	guard := &netguard.Dialer{Hooks: o.Hooks, AllowPrivate: c.allowPrivate || o.AllowPrivate, Permit: c.permitter(env)}
	if err := guard.Prepare(ctx, c.u.Hostname()); err != nil {
		return c.fetchError(ctx, err, timeout)
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()

	host := strings.ToLower(c.u.Hostname())
	var crossed *url.URL
	client := &http.Client{
		Transport: &http.Transport{
			// No proxy: a proxy would connect on acpd's behalf, past the
			// address check.
			Proxy:                  nil,
			DialContext:            guard.DialContext,
			ForceAttemptHTTP2:      true,
			TLSHandshakeTimeout:    10 * time.Second,
			MaxResponseHeaderBytes: 64 << 10,
		},
		CheckRedirect: func(req *http.Request, via []*http.Request) error {
			if len(via) > webFetchMaxRedirects {
				return fmt.Errorf("stopped after %d redirects", webFetchMaxRedirects)
			}
			if strings.ToLower(req.URL.Hostname()) != host {
				crossed = req.URL
				return http.ErrUseLastResponse
			}
			if req.URL.Scheme != "http" && req.URL.Scheme != "https" {
				return fmt.Errorf("redirect to a %s URL is not followed", req.URL.Scheme)
			}
			return nil
		},
	}
	defer client.CloseIdleConnections()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.u.String(), nil)
	if err != nil {
		return failure(ErrTypeExecutionFailed, err)
	}
	req.Header.Set("User-Agent", "acpd-web-fetch (+https://github.com/acpd/acpd)")
	req.Header.Set("Accept", "text/html, text/markdown, text/plain, application/json;q=0.9, */*;q=0.5")
	resp, err := client.Do(req)
	if err != nil {
		return c.fetchError(ctx, err, timeout)
	}
	defer resp.Body.Close()

	if crossed != nil {
		msg := fmt.Sprintf("%s redirected (HTTP %d) to a different host: %s\nThe redirect was not followed. To fetch it, call web_fetch again with that URL.",
			c.u, resp.StatusCode, crossed)
		return Result{LLMContent: msg, Content: []acp.ToolCallContent{acp.TextContent(msg)},
			RawOutput: map[string]any{"status": resp.StatusCode, "redirect": crossed.String()}}
	}
	final := resp.Request.URL
	body, capped, err := readCapped(resp.Body, maxBytes)
	if err != nil {
		return c.fetchError(ctx, err, timeout)
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		err := fmt.Errorf("fetching %s failed: HTTP %s", final, resp.Status)
		return failure(ErrTypeExecutionFailed, err)
	}

	ctype := resp.Header.Get("Content-Type")
	if ctype == "" {
		ctype = http.DetectContentType(body)
	}
	mt, _, _ := mime.ParseMediaType(ctype)
	var text string
	var page htmlconv.Result
	switch kind := textKind(mt); {
	case kind == "html":
		// Twice the output limit of text: the Markdown is cut to the limit
		// below, and converting the rest of a long page would only cost.
		page, err = htmlconv.Convert(ctx, body, ctype, final, htmlconv.Limits{MaxText: 2 * maxOutput(env)})
		if err != nil {
			return c.fetchError(ctx, err, timeout)
		}
		text = page.Markdown
	case kind == "text" && !looksBinary(body):
		text = htmlconv.DecodeText(body, ctype)
	default:
		err := fmt.Errorf("%s is binary content (%s), which web_fetch does not return; only HTML, text and JSON are", final, mt)
		return failure(ErrTypeExecutionFailed, err)
	}

	var b strings.Builder
	fmt.Fprintf(&b, "Content of %s (%s)", final, mt)
	if final.String() != c.u.String() {
		fmt.Fprintf(&b, ", redirected from %s", c.u)
	}
	fmt.Fprintf(&b, ".\nRequested: %s\n", c.prompt)
	if capped {
		fmt.Fprintf(&b, "[download stopped at %d bytes; the rest of the body was not read]\n", maxBytes)
	}
	if page.Cut {
		b.WriteString("[the page is long: only its beginning was converted]\n")
	}
	if page.Flattened > 0 {
		fmt.Fprintf(&b, "[quotes, lists or elements nested deeper than %d levels are shown at that depth]\n", htmlconv.DefaultMaxNesting)
	}
	b.WriteString("\n")
	b.WriteString(text)
	out := truncateHead(b.String(), maxOutput(env))
	return Result{
		LLMContent: out,
		Content:    []acp.ToolCallContent{acp.TextContent(out)},
		RawOutput:  map[string]any{"status": resp.StatusCode, "contentType": mt, "bytes": len(body), "url": final.String()},
	}
}

func (c *webFetchCall) fetchError(ctx context.Context, err error, timeout time.Duration) Result {
	switch {
	case errors.Is(err, netguard.ErrBlockedAddress), errors.Is(err, netguard.ErrPrivateAddress):
		return failure(ErrTypePermissionDenied, fmt.Errorf("fetching %s: %w", c.u, unwrapURL(err)))
	case errors.Is(ctx.Err(), context.DeadlineExceeded), isTimeout(err):
		return failure(ErrTypeTimeout, fmt.Errorf("fetching %s: no complete answer within %v", c.u, timeout))
	}
	return failure(ErrTypeExecutionFailed, fmt.Errorf("fetching %s: %w", c.u, unwrapURL(err)))
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// unwrapURL drops *url.Error's repetition of the method and URL.
func unwrapURL(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err
	}
	return err
}

// readCapped reads at most max bytes; capped reports that more followed.
func readCapped(r io.Reader, max int64) (body []byte, capped bool, err error) {
	body, err = io.ReadAll(io.LimitReader(r, max+1))
	if int64(len(body)) > max {
		return body[:max], true, err
	}
	return body, false, err
}

// textKind sorts a media type: "html" is converted, "text" passed through,
// anything else is binary.
func textKind(mt string) string {
	switch {
	case mt == "text/html", mt == "application/xhtml+xml":
		return "html"
	case strings.HasPrefix(mt, "text/"),
		mt == "application/json", strings.HasSuffix(mt, "+json"),
		mt == "application/xml", strings.HasSuffix(mt, "+xml"),
		mt == "application/javascript", mt == "application/x-javascript", mt == "application/ecmascript",
		mt == "application/x-yaml", mt == "application/yaml", mt == "application/toml",
		mt == "application/x-sh", mt == "application/ndjson", mt == "application/x-ndjson":
		return "text"
	}
	return "binary"
}
