package tools

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/acpd/acpd/session/tools/netguard"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// dialRecorder is the dialer hook: it records every address web_fetch
// dials and connects only to loopback.
type dialRecorder struct {
	mu    sync.Mutex
	addrs []string
}

func (d *dialRecorder) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	d.mu.Lock()
	d.addrs = append(d.addrs, addr)
	d.mu.Unlock()
	host, _, _ := net.SplitHostPort(addr)
	if a, err := netip.ParseAddr(host); err != nil || !a.IsLoopback() {
		return nil, errors.New("test dialer: refusing to connect beyond loopback: " + addr)
	}
	return (&net.Dialer{}).DialContext(ctx, network, addr)
}

func (d *dialRecorder) attempts() []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return append([]string(nil), d.addrs...)
}

func fetchEnv(t *testing.T, d *dialRecorder, resolve func(context.Context, string) ([]netip.Addr, error)) *Env {
	w := newWorkspace(t)
	env := *w.env
	if resolve == nil {
		resolve = func(context.Context, string) ([]netip.Addr, error) {
			return []netip.Addr{netip.MustParseAddr("127.0.0.1")}, nil
		}
	}
	// The test servers are on loopback, a private address: these tests are
	// about what is fetched, so private addresses are allowed
	// (tools.webFetchAllowPrivate); TestWebFetch_Private* test the question.
	env.WebFetch = &WebFetchOptions{Hooks: netguard.Hooks{Dial: d.dial, Resolve: resolve}, AllowPrivate: true}
	return &env
}

func fetch(t *testing.T, env *Env, url string) Result {
	t.Helper()
	_, res := run(t, t.Context(), env, NameWebFetch, map[string]any{"url": url, "prompt": "summarise"})
	return res
}

func TestWebFetch_HTMLBecomesMarkdown(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		_, _ = w.Write([]byte(`<html><head><title>T</title><script>var x=1;</script></head><body>
<h1>Install</h1><p>Run <code>go build</code>, then read <a href="/docs/next">the next page</a>.</p>
<ul><li>one</li><li>two</li></ul></body></html>`))
	}))
	defer srv.Close()
	d := &dialRecorder{}
	env := fetchEnv(t, d, nil)
	c, err := tool(t, NameWebFetch).Build(env, args(t, map[string]any{"url": srv.URL + "/page#frag", "prompt": "how to install"}))
	require.NoError(t, err)
	assert.Equal(t, "Fetch "+srv.URL+"/page", c.Title())
	assert.Empty(t, c.Locations())
	assert.Equal(t, ConfirmFetch, c.Confirmation().Kind)
	assert.Equal(t, "127.0.0.1", c.Confirmation().Label)
	res := c.Execute(t.Context(), env)
	require.NoError(t, res.Err, res.LLMContent)
	assert.Contains(t, res.LLMContent, "Content of "+srv.URL+"/page (text/html).\nRequested: how to install\n")
	assert.Contains(t, res.LLMContent, "# Install")
	assert.Contains(t, res.LLMContent, "Run `go build`, then read [the next page]("+srv.URL+"/docs/next).")
	assert.Contains(t, res.LLMContent, "- one\n- two")
	assert.NotContains(t, res.LLMContent, "var x=1")
	assert.Len(t, d.attempts(), 1)
}

// The second attack's page through the tool: 2 MiB of paragraphs in 99
// nested quotes comes back as its converted beginning, eight levels deep,
// saying both.
func TestWebFetch_NestedQuotesPageBounded(t *testing.T) {
	page := strings.Repeat("<blockquote>", 99) +
		strings.Repeat("<p>Lorem ipsum dolor sit amet, consectetur adipiscing elit.</p>\n", 2<<20/64)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		_, _ = w.Write([]byte(page))
	}))
	defer srv.Close()
	res := fetch(t, fetchEnv(t, &dialRecorder{}, nil), srv.URL)
	require.NoError(t, res.Err, res.LLMContent)
	assert.Contains(t, res.LLMContent, "[the page is long: only its beginning was converted]\n")
	assert.Contains(t, res.LLMContent, "[quotes, lists or elements nested deeper than 8 levels are shown at that depth]\n")
	assert.Contains(t, res.LLMContent, strings.Repeat("> ", 8)+"Lorem ipsum")
	assert.NotContains(t, res.LLMContent, strings.Repeat("> ", 9))
}

func TestWebFetch_TextAndJSONPassThroughBinaryRefused(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/j":
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write([]byte(`{"a": [1, 2]}`))
		case "/t":
			w.Header().Set("Content-Type", "text/plain")
			_, _ = w.Write([]byte("<b>not html</b>\n"))
		case "/png":
			w.Header().Set("Content-Type", "image/png")
			_, _ = w.Write([]byte("\x89PNG\r\n\x1a\n\x00\x00"))
		case "/sniff":
			w.Header()["Content-Type"] = nil // no type: sniffed
			_, _ = w.Write([]byte("\x00\x01\x02binary"))
		case "/nul":
			w.Header().Set("Content-Type", "text/plain")
			_, _ = w.Write([]byte("text\x00with a NUL"))
		case "/latin1":
			w.Header().Set("Content-Type", "text/html; charset=iso-8859-1")
			_, _ = w.Write([]byte("<p>caf\xe9</p>"))
		case "/meta":
			w.Header().Set("Content-Type", "text/html")
			_, _ = w.Write([]byte("<html><head><meta charset=\"windows-1252\"></head><body><p>na\xefve \x93quoted\x94</p></body></html>"))
		case "/latin1.txt":
			w.Header().Set("Content-Type", "text/plain; charset=latin1")
			_, _ = w.Write([]byte("gar\xe7on\n"))
		case "/404":
			http.NotFound(w, r)
		}
	}))
	defer srv.Close()
	env := fetchEnv(t, &dialRecorder{}, nil)
	res := fetch(t, env, srv.URL+"/j")
	require.NoError(t, res.Err)
	assert.True(t, strings.HasSuffix(res.LLMContent, "\n\n"+`{"a": [1, 2]}`), res.LLMContent)
	res = fetch(t, env, srv.URL+"/t")
	require.NoError(t, res.Err)
	assert.True(t, strings.HasSuffix(res.LLMContent, "\n\n<b>not html</b>\n"), res.LLMContent)
	res = fetch(t, env, srv.URL+"/latin1")
	require.NoError(t, res.Err)
	assert.True(t, strings.HasSuffix(res.LLMContent, "\n\ncafé"), res.LLMContent)
	res = fetch(t, env, srv.URL+"/meta")
	require.NoError(t, res.Err)
	assert.True(t, strings.HasSuffix(res.LLMContent, "\n\nnaïve “quoted”"), res.LLMContent)
	res = fetch(t, env, srv.URL+"/latin1.txt")
	require.NoError(t, res.Err)
	assert.True(t, strings.HasSuffix(res.LLMContent, "\n\ngarçon\n"), res.LLMContent)
	for _, p := range []string{"/png", "/sniff", "/nul"} {
		res = fetch(t, env, srv.URL+p)
		require.Error(t, res.Err, p)
		assert.Contains(t, res.LLMContent, "binary content", p)
	}
	res = fetch(t, env, srv.URL+"/404")
	require.Error(t, res.Err)
	assert.Contains(t, res.LLMContent, "HTTP 404 Not Found")
}

func TestWebFetch_Redirects(t *testing.T) {
	var otherHits atomic.Int32
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { otherHits.Add(1) }))
	defer other.Close()
	_, otherPort, _ := net.SplitHostPort(other.Listener.Addr().String())
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/a":
			http.Redirect(w, r, "/b", http.StatusFound)
		case "/b":
			_, _ = w.Write([]byte("landed"))
		case "/away":
			http.Redirect(w, r, "http://localhost:"+otherPort+"/x", http.StatusMovedPermanently)
		case "/loop":
			http.Redirect(w, r, "/loop", http.StatusFound)
		}
	}))
	defer srv.Close()
	env := fetchEnv(t, &dialRecorder{}, nil)

	res := fetch(t, env, srv.URL+"/a")
	require.NoError(t, res.Err)
	assert.Contains(t, res.LLMContent, "Content of "+srv.URL+"/b (text/plain), redirected from "+srv.URL+"/a.")

	res = fetch(t, env, srv.URL+"/away")
	require.NoError(t, res.Err, "a cross-host redirect is reported, not an error")
	assert.Contains(t, res.LLMContent, "redirected (HTTP 301) to a different host: http://localhost:"+otherPort+"/x")
	assert.Contains(t, res.LLMContent, "not followed")
	assert.Zero(t, otherHits.Load())

	res = fetch(t, env, srv.URL+"/loop")
	require.Error(t, res.Err)
	assert.Contains(t, res.LLMContent, "stopped after 10 redirects")
}

func TestWebFetch_MetadataRefusedBeforeConnecting(t *testing.T) {
	d := &dialRecorder{}
	env := fetchEnv(t, d, nil)
	for _, u := range []string{
		"http://169.254.169.254/latest/meta-data/",
		"http://169.254.1.1:8080/",
		"http://[fd00:ec2::254]/latest/meta-data/",
		"http://[fe80::1]/",
		"http://[::ffff:169.254.169.254]/",
		"http://metadata.google.internal/computeMetadata/v1/",
		"http://METADATA.google.internal./",
		"http://100.100.100.200/latest/meta-data/",
	} {
		_, err := tool(t, NameWebFetch).Build(env, args(t, map[string]any{"url": u, "prompt": "p"}))
		require.ErrorIs(t, err, netguard.ErrBlockedAddress, u)
	}
	for _, u := range []string{"file:///etc/passwd", "ftp://example.com/x", "gopher://x/", "http:///nohost", "https://user:pw@example.com/"} {
		_, err := tool(t, NameWebFetch).Build(env, args(t, map[string]any{"url": u, "prompt": "p"}))
		require.Error(t, err, u)
		assert.Contains(t, err.Error(), "params/url", u)
	}
	assert.Empty(t, d.attempts())
}

func TestWebFetch_ResolvedMetadataRefused(t *testing.T) {
	d := &dialRecorder{}
	resolve := func(_ context.Context, host string) ([]netip.Addr, error) {
		switch host {
		case "evil.test":
			return []netip.Addr{netip.MustParseAddr("169.254.169.254")}, nil
		case "mixed.test":
			return []netip.Addr{netip.MustParseAddr("127.0.0.1"), netip.MustParseAddr("fd00:ec2::254")}, nil
		}
		return nil, errors.New("no such host")
	}
	env := fetchEnv(t, d, resolve)
	for _, u := range []string{"http://evil.test/", "http://mixed.test:8080/"} {
		res := fetch(t, env, u)
		require.ErrorIs(t, res.Err, netguard.ErrBlockedAddress, u)
		assert.Equal(t, ErrTypePermissionDenied, res.ErrType)
		assert.Contains(t, res.LLMContent, "resolves to")
	}
	assert.Empty(t, d.attempts(), "refused before any connection")
}

// TestWebFetch_RedirectRebindingRefused: the same host name resolves to
// loopback first and to the metadata address at the redirect; the second
// hop is refused before connecting.
func TestWebFetch_RedirectRebindingRefused(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Connection", "close") // the next hop dials again
		http.Redirect(w, r, "/next", http.StatusFound)
	}))
	defer srv.Close()
	_, port, _ := net.SplitHostPort(srv.Listener.Addr().String())
	var calls atomic.Int32
	resolve := func(context.Context, string) ([]netip.Addr, error) {
		if calls.Add(1) == 1 {
			return []netip.Addr{netip.MustParseAddr("127.0.0.1")}, nil
		}
		return []netip.Addr{netip.MustParseAddr("169.254.169.254")}, nil
	}
	d := &dialRecorder{}
	env := fetchEnv(t, d, resolve)
	res := fetch(t, env, "http://rebind.test:"+port+"/start")
	require.ErrorIs(t, res.Err, netguard.ErrBlockedAddress)
	assert.Equal(t, []string{"127.0.0.1:" + port}, d.attempts(), "only the loopback hop was dialled")
}

func TestWebFetch_CapsAndTimeout(t *testing.T) {
	big := strings.Repeat("0123456789abcdef", 4096) // 64 KiB
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/big":
			w.Header().Set("Content-Type", "text/plain")
			_, _ = w.Write([]byte(big))
		case "/hang":
			select {
			case <-release:
			case <-r.Context().Done():
			}
		}
	}))
	defer srv.Close()
	defer close(release)
	env := fetchEnv(t, &dialRecorder{}, nil)
	env.MaxOutputBytes = 1000
	res := fetch(t, env, srv.URL+"/big")
	require.NoError(t, res.Err)
	assert.Contains(t, res.LLMContent, "[output truncated:")
	assert.Less(t, len(res.LLMContent), 1100)

	env.MaxOutputBytes = 1 << 20
	env.WebFetch.MaxBytes = 4096
	res = fetch(t, env, srv.URL+"/big")
	require.NoError(t, res.Err)
	assert.Contains(t, res.LLMContent, "[download stopped at 4096 bytes")
	assert.Equal(t, 4096, res.RawOutput.(map[string]any)["bytes"])

	env.WebFetch.Timeout = 150 * time.Millisecond
	start := time.Now()
	res = fetch(t, env, srv.URL+"/hang")
	assert.Equal(t, ErrTypeTimeout, res.ErrType, res.LLMContent)
	assert.Contains(t, res.LLMContent, "no complete answer within 150ms")
	assert.Less(t, time.Since(start), 5*time.Second)
}

// permitRecorder is Env.Permit: it records each question and answers with
// the next of its answers (no when they run out).
type permitRecorder struct {
	mu      sync.Mutex
	asked   []Confirmation
	answers []bool
}

func (p *permitRecorder) permit(_ context.Context, c Confirmation) (bool, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.asked = append(p.asked, c)
	if len(p.answers) == 0 {
		return false, nil
	}
	ok := p.answers[0]
	p.answers = p.answers[1:]
	return ok, nil
}

func (p *permitRecorder) questions() []Confirmation {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]Confirmation(nil), p.asked...)
}

// privateEnv is fetchEnv without the switch, asking p.
func privateEnv(t *testing.T, d *dialRecorder, resolve func(context.Context, string) ([]netip.Addr, error), p *permitRecorder) *Env {
	env := fetchEnv(t, d, resolve)
	env.WebFetch.AllowPrivate = false
	if p != nil {
		env.Permit = p.permit
	}
	return env
}

// TestWebFetch_PrivateAsksEveryTime: a loopback address is fetched only
// after the user allows it, and asked about again at the next fetch; a
// refusal connects nowhere.
func TestWebFetch_PrivateAsksEveryTime(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = w.Write([]byte("local page"))
	}))
	defer srv.Close()
	d := &dialRecorder{}
	p := &permitRecorder{answers: []bool{true, true, false}}
	env := privateEnv(t, d, nil, p)

	c, err := tool(t, NameWebFetch).Build(env, args(t, map[string]any{"url": srv.URL + "/a", "prompt": "p"}))
	require.NoError(t, err)
	assert.Equal(t, ConfirmPrivateNetwork, c.Confirmation().Kind, "asked when connecting, not before")
	res := c.Execute(t.Context(), env)
	require.NoError(t, res.Err, res.LLMContent)
	assert.Contains(t, res.LLMContent, "local page")
	res = fetch(t, env, srv.URL+"/b")
	require.NoError(t, res.Err, res.LLMContent)
	asked := p.questions()
	require.Len(t, asked, 2, "every fetch asks")
	assert.Equal(t, ConfirmPrivateNetwork, asked[0].Kind)
	assert.Equal(t, "127.0.0.1", asked[0].Label)
	assert.Contains(t, asked[0].Content[0].Content.Text, "127.0.0.1 is 127.0.0.1 (loopback)")
	assert.Len(t, d.attempts(), 2)

	res = fetch(t, env, srv.URL+"/c")
	require.ErrorIs(t, res.Err, netguard.ErrPrivateAddress)
	assert.Equal(t, ErrTypePermissionDenied, res.ErrType)
	assert.Contains(t, res.LLMContent, "the user did not allow 127.0.0.1 (127.0.0.1 (loopback))")
	assert.Len(t, d.attempts(), 2, "a refusal connects nowhere")

	env.Permit = nil
	res = fetch(t, env, srv.URL+"/d")
	require.ErrorIs(t, res.Err, netguard.ErrPrivateAddress)
	assert.Contains(t, res.LLMContent, "no one can be asked")
	assert.Len(t, d.attempts(), 2)
}

// TestWebFetch_PrivateByResolution: a name is asked about once it resolves
// to a private address (or is localhost); a public answer asks nothing.
func TestWebFetch_PrivateByResolution(t *testing.T) {
	resolve := func(_ context.Context, host string) ([]netip.Addr, error) {
		switch host {
		case "intranet.test":
			return []netip.Addr{netip.MustParseAddr("10.1.2.3")}, nil
		case "tailnet.test":
			return []netip.Addr{netip.MustParseAddr("100.101.102.103")}, nil
		case "mapped.test":
			return []netip.Addr{netip.MustParseAddr("::ffff:192.168.1.1")}, nil
		case "split.test":
			return []netip.Addr{netip.MustParseAddr("8.8.8.8"), netip.MustParseAddr("fd12::1")}, nil
		}
		return []netip.Addr{netip.MustParseAddr("8.8.8.8")}, nil
	}
	d := &dialRecorder{}
	p := &permitRecorder{}
	env := privateEnv(t, d, resolve, p)
	for _, u := range []string{"http://intranet.test/", "http://tailnet.test/", "http://mapped.test/", "http://split.test/"} {
		c, err := tool(t, NameWebFetch).Build(env, args(t, map[string]any{"url": u, "prompt": "p"}))
		require.NoError(t, err)
		assert.Equal(t, ConfirmFetch, c.Confirmation().Kind, "%s: a name is asked about as any host first", u)
		res := c.Execute(t.Context(), env)
		require.ErrorIs(t, res.Err, netguard.ErrPrivateAddress, u)
	}
	assert.Empty(t, d.attempts())
	var texts []string
	for _, c := range p.questions() {
		texts = append(texts, c.Content[0].Content.Text)
	}
	require.Len(t, texts, 4)
	assert.Contains(t, texts[0], "intranet.test is 10.1.2.3 (private network)")
	assert.Contains(t, texts[1], "tailnet.test is 100.101.102.103 (shared (carrier-grade NAT) network)")
	assert.Contains(t, texts[2], "mapped.test is 192.168.1.1 (private network)")
	assert.Contains(t, texts[3], "split.test is 8.8.8.8, fd12::1 (private network)")

	c, err := tool(t, NameWebFetch).Build(env, args(t, map[string]any{"url": "http://LocalHost:9/", "prompt": "p"}))
	require.NoError(t, err)
	assert.Equal(t, ConfirmPrivateNetwork, c.Confirmation().Kind, "localhost is private by definition")
	res := fetch(t, env, "http://public.test/")
	assert.NotErrorIs(t, res.Err, netguard.ErrPrivateAddress, "a public address asks nothing")
	assert.Len(t, p.questions(), 4)
}

// TestWebFetch_PrivateRedirectHops: the allowed address serves the whole
// call, redirects included; a hop whose name now resolves to another
// private address is asked about again, and refused without connecting.
func TestWebFetch_PrivateRedirectHops(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Connection", "close") // every hop dials again
		if r.URL.Path == "/end" {
			_, _ = w.Write([]byte("arrived"))
			return
		}
		http.Redirect(w, r, "/end", http.StatusFound)
	}))
	defer srv.Close()
	_, port, _ := net.SplitHostPort(srv.Listener.Addr().String())
	var calls atomic.Int32
	rebinding := func(_ context.Context, host string) ([]netip.Addr, error) {
		if host == "rebind.test" && calls.Add(1) > 1 {
			return []netip.Addr{netip.MustParseAddr("127.0.0.2")}, nil
		}
		return []netip.Addr{netip.MustParseAddr("127.0.0.1")}, nil
	}

	d := &dialRecorder{}
	p := &permitRecorder{answers: []bool{true}}
	env := privateEnv(t, d, rebinding, p)
	res := fetch(t, env, "http://steady.test:"+port+"/start")
	require.NoError(t, res.Err, res.LLMContent)
	assert.Contains(t, res.LLMContent, "arrived")
	assert.Len(t, p.questions(), 1, "one question covers the call's hops to the allowed address")
	assert.Len(t, d.attempts(), 2)

	d = &dialRecorder{}
	p = &permitRecorder{answers: []bool{true, false}}
	env = privateEnv(t, d, rebinding, p)
	res = fetch(t, env, "http://rebind.test:"+port+"/start")
	require.ErrorIs(t, res.Err, netguard.ErrPrivateAddress, res.LLMContent)
	require.Len(t, p.questions(), 2)
	assert.Contains(t, p.questions()[1].Content[0].Content.Text, "rebind.test is 127.0.0.2 (loopback)")
	assert.Equal(t, []string{"127.0.0.1:" + port}, d.attempts(), "the second hop connected nowhere")
}
