package otlp

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/acpd/acpd/session/credhttp"
)

// maxResponse bounds what is read of a collector's answer: an OTLP
// response is a few bytes, an error page a few hundred.
const maxResponse = 64 << 10

const userAgent = "acpd-otlp-exporter"

// gRPC methods of the collector's services.
var grpcMethods = map[string]string{
	signalTraces:  "/opentelemetry.proto.collector.trace.v1.TraceService/Export",
	signalMetrics: "/opentelemetry.proto.collector.metrics.v1.MetricsService/Export",
}

// client sends one signal's export requests.
type client struct {
	s      settings
	target string // where requests go: the signal URL, or the gRPC method's
	hc     *http.Client
	// stop ends exports in flight and retry waits at shutdown.
	stop   context.Context
	cancel context.CancelFunc
}

func newClient(s settings, signal string) *client {
	tr := &http.Transport{
		DialContext:         (&net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		TLSClientConfig:     s.tls,
		TLSHandshakeTimeout: 10 * time.Second,
		IdleConnTimeout:     90 * time.Second,
		MaxIdleConns:        10,
	}
	target := s.url
	if s.proto == ProtocolGRPC {
		// gRPC is HTTP/2 only: prior-knowledge h2c for a plaintext
		// endpoint, h2 negotiated by ALPN over TLS.
		p := new(http.Protocols)
		if s.insecure {
			p.SetUnencryptedHTTP2(true)
		} else {
			p.SetHTTP2(true)
			tr.Proxy = http.ProxyFromEnvironment
		}
		tr.Protocols = p
		target += grpcMethods[signal]
	} else {
		tr.Proxy = http.ProxyFromEnvironment
		tr.ForceAttemptHTTP2 = true
	}
	stop, cancel := context.WithCancel(context.Background())
	return &client{s: s, target: target, hc: credhttp.NewClient(tr, 0), stop: stop, cancel: cancel}
}

// close ends exports in flight and drops idle connections.
func (c *client) close() {
	c.cancel()
	c.hc.CloseIdleConnections()
}

// export sends msg, an encoded export request, retrying retryable
// failures; it answers the encoded export response.
func (c *client) export(ctx context.Context, msg []byte) ([]byte, error) {
	ctx, cancel := c.withStop(ctx)
	defer cancel()
	if c.s.proto == ProtocolGRPC {
		// For gRPC the timeout bounds the whole export, retries included,
		// as the official gRPC exporter bounds it; for HTTP each attempt.
		var cancelT context.CancelFunc
		ctx, cancelT = context.WithTimeout(ctx, c.s.timeout)
		defer cancelT()
	}
	body, err := c.encodeBody(msg)
	if err != nil {
		return nil, err
	}
	first := time.Now()
	wait := c.s.retry.Initial
	for {
		resp, err := c.attempt(ctx, body)
		if err == nil {
			return resp, nil
		}
		var ee *exportError
		retryable := errors.As(err, &ee) && ee.retryable
		if ee == nil && ctx.Err() == nil {
			retryable = true // a lost connection or a refused one
		}
		if !retryable || ctx.Err() != nil {
			return nil, err
		}
		d := jitter(wait)
		if ee != nil && ee.throttle > 0 {
			d = ee.throttle
		}
		if time.Since(first)+d > c.s.retry.MaxElapsed {
			return nil, err
		}
		if dl, ok := ctx.Deadline(); ok && time.Until(dl) < d {
			return nil, err // the next attempt could not start in time
		}
		t := time.NewTimer(d)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, errors.Join(err, context.Cause(ctx))
		case <-t.C:
		}
		wait = min(time.Duration(float64(wait)*1.5), c.s.retry.Max)
	}
}

// jitter spreads a wait over ±50%, so exporters restarted together do not
// retry together.
func jitter(d time.Duration) time.Duration {
	return d/2 + rand.N(d+1)
}

// withStop is ctx also ended by close.
func (c *client) withStop(ctx context.Context) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(ctx)
	unhook := context.AfterFunc(c.stop, cancel)
	return ctx, func() { unhook(); cancel() }
}

// encodeBody is the request body: the message, gzipped when asked, and for
// gRPC behind the five-byte frame prefix (compressed flag, big-endian
// length).
func (c *client) encodeBody(msg []byte) ([]byte, error) {
	payload := msg
	if c.s.gzip {
		var b bytes.Buffer
		zw := gzip.NewWriter(&b)
		if _, err := zw.Write(msg); err != nil {
			return nil, err
		}
		if err := zw.Close(); err != nil {
			return nil, err
		}
		payload = b.Bytes()
	}
	if c.s.proto != ProtocolGRPC {
		return payload, nil
	}
	framed := make([]byte, 5, 5+len(payload))
	if c.s.gzip {
		framed[0] = 1
	}
	binary.BigEndian.PutUint32(framed[1:], uint32(len(payload)))
	return append(framed, payload...), nil
}

// attempt makes one request.
func (c *client) attempt(ctx context.Context, body []byte) ([]byte, error) {
	if c.s.proto == ProtocolGRPC {
		return c.grpcCall(ctx, body)
	}
	ctx, cancel := context.WithTimeout(ctx, c.s.timeout)
	defer cancel()
	return c.httpPost(ctx, body)
}

func (c *client) request(ctx context.Context, body []byte) (*http.Request, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.target, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	for k, v := range c.s.headers {
		req.Header.Set(k, v)
	}
	req.Header.Set("User-Agent", userAgent)
	return req, nil
}

// do sends req and reads the answer's body (at most maxResponse bytes),
// closing it. Reading to the end is what fills in a gRPC answer's
// trailers, so the caller may read resp.Trailer afterwards.
func (c *client) do(req *http.Request) (*http.Response, []byte, error) {
	resp, err := c.hc.Do(req)
	if err != nil {
		return nil, nil, err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxResponse))
	if err != nil {
		return nil, nil, err
	}
	return resp, data, nil
}

func (c *client) httpPost(ctx context.Context, body []byte) ([]byte, error) {
	req, err := c.request(ctx, body)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/x-protobuf")
	if c.s.gzip {
		req.Header.Set("Content-Encoding", "gzip")
	}
	resp, data, err := c.do(req)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode/100 == 2 {
		if !strings.HasPrefix(resp.Header.Get("Content-Type"), "application/x-protobuf") {
			return nil, nil // no partial success to read
		}
		return data, nil
	}
	ee := &exportError{status: resp.Status, msg: httpErrorMessage(resp.Header.Get("Content-Type"), data)}
	switch resp.StatusCode {
	case http.StatusTooManyRequests, http.StatusBadGateway, http.StatusServiceUnavailable, http.StatusGatewayTimeout:
		ee.retryable = true
		ee.throttle = retryAfter(resp.Header.Get("Retry-After"), time.Now())
	}
	return nil, ee
}

// httpErrorMessage is what a collector's error body says: OTLP sends a
// google.rpc.Status whose message is field 2; a proxy in front may answer
// with text.
func httpErrorMessage(contentType string, body []byte) string {
	switch {
	case strings.HasPrefix(contentType, "application/x-protobuf"):
		_, msg, _ := decodeStatus(body)
		return msg
	case strings.HasPrefix(contentType, "text/"), strings.HasPrefix(contentType, "application/json"):
		s := strings.TrimSpace(string(body))
		if len(s) > 512 {
			s = s[:512] + "…"
		}
		return s
	}
	return ""
}

// retryAfter reads Retry-After: a number of seconds or an HTTP date; 0
// when absent or unreadable, leaving the wait to the backoff.
func retryAfter(v string, now time.Time) time.Duration {
	if v == "" {
		return 0
	}
	if s, err := strconv.Atoi(strings.TrimSpace(v)); err == nil {
		if s < 0 {
			return 0
		}
		return time.Duration(s) * time.Second
	}
	if t, err := http.ParseTime(v); err == nil && t.After(now) {
		return t.Sub(now)
	}
	return 0
}

// gRPC status codes used here, and the names errors show.
const (
	grpcOK                = 0
	grpcCanceled          = 1
	grpcUnknown           = 2
	grpcDeadlineExceeded  = 4
	grpcResourceExhausted = 8
	grpcAborted           = 10
	grpcOutOfRange        = 11
	grpcUnimplemented     = 12
	grpcInternal          = 13
	grpcUnavailable       = 14
	grpcDataLoss          = 15
	grpcUnauthenticated   = 16
	grpcPermissionDenied  = 7
)

var grpcCodeNames = [...]string{"OK", "Canceled", "Unknown", "InvalidArgument", "DeadlineExceeded", "NotFound",
	"AlreadyExists", "PermissionDenied", "ResourceExhausted", "FailedPrecondition", "Aborted", "OutOfRange",
	"Unimplemented", "Internal", "Unavailable", "DataLoss", "Unauthenticated"}

func grpcCodeName(code int) string {
	if code >= 0 && code < len(grpcCodeNames) {
		return grpcCodeNames[code]
	}
	return "Code(" + strconv.Itoa(code) + ")"
}

func (c *client) grpcCall(ctx context.Context, body []byte) ([]byte, error) {
	req, err := c.request(ctx, body)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/grpc")
	req.Header.Set("Te", "trailers")
	req.Header.Set("Grpc-Accept-Encoding", "gzip")
	if c.s.gzip {
		req.Header.Set("Grpc-Encoding", "gzip")
	}
	if dl, ok := ctx.Deadline(); ok {
		req.Header.Set("Grpc-Timeout", grpcTimeout(time.Until(dl)))
	}
	resp, data, err := c.do(req)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		// Not a gRPC answer (a proxy's): map the HTTP status as gRPC does.
		code := grpcUnknown
		switch resp.StatusCode {
		case http.StatusBadRequest:
			code = grpcInternal
		case http.StatusUnauthorized:
			code = grpcUnauthenticated
		case http.StatusForbidden:
			code = grpcPermissionDenied
		case http.StatusNotFound:
			code = grpcUnimplemented
		case http.StatusTooManyRequests, http.StatusBadGateway, http.StatusServiceUnavailable, http.StatusGatewayTimeout:
			code = grpcUnavailable
		}
		return nil, &exportError{grpc: true, code: code, msg: "HTTP " + resp.Status, retryable: code == grpcUnavailable}
	}
	// Status is in the trailers, or in the headers of a trailers-only
	// answer.
	h := resp.Trailer
	if h.Get("Grpc-Status") == "" {
		h = resp.Header
	}
	st := h.Get("Grpc-Status")
	if st == "" {
		return nil, &exportError{grpc: true, code: grpcInternal, msg: "the answer has no grpc-status"}
	}
	code, err := strconv.Atoi(st)
	if err != nil {
		return nil, &exportError{grpc: true, code: grpcUnknown, msg: "grpc-status " + st}
	}
	if code != grpcOK {
		msg, _ := url.PathUnescape(h.Get("Grpc-Message"))
		ee := &exportError{grpc: true, code: code, msg: msg}
		delay, hasRetryInfo := retryInfo(h.Get("Grpc-Status-Details-Bin"))
		switch code {
		case grpcCanceled, grpcDeadlineExceeded, grpcAborted, grpcOutOfRange, grpcUnavailable, grpcDataLoss:
			ee.retryable, ee.throttle = true, delay
		case grpcResourceExhausted:
			// Retryable only when the server says when to come back.
			ee.retryable, ee.throttle = hasRetryInfo, delay
		}
		return nil, ee
	}
	return grpcMessage(data, resp.Header.Get("Grpc-Encoding"))
}

// grpcMessage unwraps the response message from its frame.
func grpcMessage(data []byte, encoding string) ([]byte, error) {
	if len(data) == 0 {
		return nil, nil
	}
	if len(data) < 5 || uint64(binary.BigEndian.Uint32(data[1:5])) != uint64(len(data)-5) {
		return nil, &exportError{grpc: true, code: grpcInternal, msg: "malformed response frame"}
	}
	msg := data[5:]
	if data[0] == 1 {
		if encoding != "gzip" {
			return nil, &exportError{grpc: true, code: grpcInternal, msg: "compressed response in encoding " + strconv.Quote(encoding)}
		}
		zr, err := gzip.NewReader(bytes.NewReader(msg))
		if err != nil {
			return nil, err
		}
		if msg, err = io.ReadAll(io.LimitReader(zr, maxResponse)); err != nil {
			return nil, err
		}
	}
	return msg, nil
}

// grpcTimeout writes a grpc-timeout value: at most eight digits and a unit.
func grpcTimeout(d time.Duration) string {
	if d <= 0 {
		return "1n"
	}
	if ms := d.Milliseconds(); ms < 1e8 {
		return strconv.FormatInt(max(ms, 1), 10) + "m"
	}
	return strconv.FormatInt(min(int64(d/time.Second), 99999999), 10) + "S"
}

// retryInfo reads a google.rpc.RetryInfo's delay from
// grpc-status-details-bin (a base64 google.rpc.Status: details are field
// 3, each a google.protobuf.Any of type_url 1 and value 2; RetryInfo's
// retry_delay is field 1, a Duration of seconds 1 and nanos 2).
func retryInfo(bin string) (time.Duration, bool) {
	if bin == "" {
		return 0, false
	}
	raw, err := base64.RawStdEncoding.DecodeString(strings.TrimRight(bin, "="))
	if err != nil {
		return 0, false
	}
	for b := raw; len(b) > 0; {
		f, rest, err := next(b)
		if err != nil {
			return 0, false
		}
		b = rest
		if f.num != 3 || f.wire != wireBytes {
			continue
		}
		var typeURL string
		var value []byte
		for a := f.p; len(a) > 0; {
			af, arest, err := next(a)
			if err != nil {
				return 0, false
			}
			a = arest
			switch {
			case af.num == 1 && af.wire == wireBytes:
				typeURL = string(af.p)
			case af.num == 2 && af.wire == wireBytes:
				value = af.p
			}
		}
		if typeURL != "type.googleapis.com/google.rpc.RetryInfo" {
			continue
		}
		var d time.Duration
		for r := value; len(r) > 0; {
			rf, rrest, err := next(r)
			if err != nil {
				return 0, false
			}
			r = rrest
			if rf.num != 1 || rf.wire != wireBytes {
				continue
			}
			for du := rf.p; len(du) > 0; {
				df, drest, err := next(du)
				if err != nil {
					return 0, false
				}
				du = drest
				switch df.num {
				case 1:
					d += time.Duration(int64(df.v)) * time.Second
				case 2:
					d += time.Duration(int32(df.v))
				}
			}
		}
		return max(d, 0), true
	}
	return 0, false
}

// decodeStatus reads a google.rpc.Status: code 1, message 2.
func decodeStatus(b []byte) (code int, msg string, err error) {
	for len(b) > 0 {
		var f field
		if f, b, err = next(b); err != nil {
			return 0, "", err
		}
		switch {
		case f.num == 1 && f.wire == wireVarint:
			code = int(int32(f.v))
		case f.num == 2 && f.wire == wireBytes:
			msg = string(f.p)
		}
	}
	return code, msg, nil
}

// exportError is a collector's refusal: an HTTP status or a gRPC status.
type exportError struct {
	grpc      bool
	status    string // HTTP: "503 Service Unavailable"
	code      int    // gRPC
	msg       string
	retryable bool
	throttle  time.Duration // the collector's Retry-After or RetryInfo
}

func (e *exportError) Error() string {
	var s string
	if e.grpc {
		s = "gRPC " + grpcCodeName(e.code)
	} else {
		s = e.status
	}
	if e.msg != "" {
		s += ": " + e.msg
	}
	return s
}

// partialSuccess reads an export response's partial_success (field 1:
// rejected count 1, error_message 2) and makes it an error when the
// collector rejected something or said why.
func partialSuccess(resp []byte, what string) error {
	for b := resp; len(b) > 0; {
		f, rest, err := next(b)
		if err != nil {
			return fmt.Errorf("reading the collector's answer: %w", err)
		}
		b = rest
		if f.num != 1 || f.wire != wireBytes {
			continue
		}
		var rejected int64
		var msg string
		for p := f.p; len(p) > 0; {
			pf, prest, err := next(p)
			if err != nil {
				return fmt.Errorf("reading the collector's answer: %w", err)
			}
			p = prest
			switch {
			case pf.num == 1 && pf.wire == wireVarint:
				rejected = int64(pf.v)
			case pf.num == 2 && pf.wire == wireBytes:
				msg = string(pf.p)
			}
		}
		if rejected != 0 || msg != "" {
			if msg == "" {
				msg = "no reason given"
			}
			return fmt.Errorf("the collector rejected %d %s: %s", rejected, what, msg)
		}
	}
	return nil
}
