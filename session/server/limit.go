package server

import (
	"bytes"
	"errors"
	"io"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// failLimiter counts failed authentications per client address in token
// buckets: perMinute failures as a burst, refilled at perMinute a minute.
// An address whose bucket is empty is refused until it refills. Hand-written
// rather than golang.org/x/time/rate: a map of two numbers per address is
// all it takes, and it keeps the binary's dependencies where they are.
type failLimiter struct {
	perMinute float64
	now       func() time.Time

	mu      sync.Mutex
	buckets map[string]*bucket
}

type bucket struct {
	tokens float64
	last   time.Time
}

// maxTracked bounds the addresses remembered; past it the refilled ones are
// dropped, then all (a spray of addresses gets a fresh budget each, which
// still bounds guesses per address).
const maxTracked = 10000

func newFailLimiter(perMinute int) *failLimiter {
	return &failLimiter{perMinute: float64(perMinute), now: time.Now, buckets: map[string]*bucket{}}
}

// refill brings b up to date; called with mu held.
func (l *failLimiter) refill(b *bucket, now time.Time) {
	b.tokens = min(l.perMinute, b.tokens+now.Sub(b.last).Minutes()*l.perMinute)
	b.last = now
}

// blocked reports whether addr has used up its failures.
func (l *failLimiter) blocked(addr string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	b := l.buckets[addr]
	if b == nil {
		return false
	}
	l.refill(b, l.now())
	return b.tokens < 1
}

// fail records one failed attempt of addr; it reports whether addr is now
// blocked (the first refusal of a run is logged, the rest are counted).
func (l *failLimiter) fail(addr string) (nowBlocked bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.now()
	b := l.buckets[addr]
	if b == nil {
		if len(l.buckets) >= maxTracked {
			l.prune(now)
		}
		b = &bucket{tokens: l.perMinute, last: now}
		l.buckets[addr] = b
	}
	l.refill(b, now)
	b.tokens = max(0, b.tokens-1)
	return b.tokens < 1
}

func (l *failLimiter) prune(now time.Time) {
	for k, b := range l.buckets {
		if l.refill(b, now); b.tokens >= l.perMinute {
			delete(l.buckets, k)
		}
	}
	if len(l.buckets) >= maxTracked {
		clear(l.buckets)
	}
}

// clientKey is the rate limit's key for a remote address: the IP, or for
// IPv6 its /64, which one host usually owns whole.
func clientKey(remoteAddr string) string {
	host, _, err := net.SplitHostPort(remoteAddr)
	if err != nil {
		host = remoteAddr
	}
	ip, err := netip.ParseAddr(host)
	if err != nil {
		return host
	}
	ip = ip.Unmap()
	if ip.Is6() {
		p, _ := ip.Prefix(64)
		return p.String()
	}
	return ip.String()
}

// limitListener closes connections past max at once instead of leaving them
// queued: a flood then costs an accept and a close each, and the clients
// that hold a connection (a running turn's stream) are not slowed.
type limitListener struct {
	net.Listener
	// plain: connections are not TLS, so their first bytes are HTTP/1.x
	// or the HTTP/2 preface (firstRead).
	plain   bool
	max     int64
	open    atomic.Int64
	refused atomic.Int64
	// onRefuse is told of each refusal (for a throttled log line).
	onRefuse func(remote net.Addr, total int64)
	// onAccept is told of each connection let in.
	onAccept func()
}

func (l *limitListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		if l.open.Add(1) > l.max {
			l.open.Add(-1)
			_ = c.Close()
			n := l.refused.Add(1)
			if l.onRefuse != nil {
				l.onRefuse(c.RemoteAddr(), n)
			}
			continue
		}
		if l.onAccept != nil {
			l.onAccept()
		}
		lc := &limitConn{Conn: c, l: l}
		if l.plain {
			lc.first = &firstLine{pre: true}
		}
		return lc, nil
	}
}

type limitConn struct {
	net.Conn
	l    *limitListener
	once sync.Once
	// first is the first line's check, until it is done.
	first *firstLine
}

// firstLine is what Read knows of a connection's first line.
type firstLine struct {
	pre  bool     // still matches the HTTP/2 preface
	seen int      // bytes seen
	tail [10]byte // the last bytes seen, for the HTTP version
	held []byte   // read, not yet handed on
	done bool     // the line was judged
}

// Read looks at a plain connection's first line: an HTTP/2 client with
// prior knowledge whose preface is wrong must find the connection closed
// (RFC 9113 section 3.4), where net/http would answer its bytes with an
// HTTP/1.1 400. So the first line is read whole before any of it is
// handed on, and one that is neither the preface nor ends in an HTTP/1.x
// version is closed.
func (c *limitConn) Read(p []byte) (int, error) {
	f := c.first
	if f == nil {
		return c.Conn.Read(p)
	}
	var b [512]byte
	for !f.done {
		n, err := c.Conn.Read(b[:])
		f.held = append(f.held, b[:n]...)
		if !f.look(b[:n]) {
			// Closed here: net/http, seeing only the end, writes nothing.
			_ = c.Conn.Close()
			return 0, io.EOF
		}
		if err != nil || len(f.held) > maxFirstLine {
			// Past the bound net/http judges the line itself.
			f.done = true
			if len(f.held) == 0 {
				c.first = nil
				return 0, err
			}
		}
	}
	n := copy(p, f.held)
	f.held = f.held[n:]
	if len(f.held) == 0 {
		c.first = nil
	}
	return n, nil
}

// maxFirstLine bounds what Read holds back.
const maxFirstLine = 8 << 10

const h2Preface = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"

// look takes the next bytes of the connection's start; it reports false
// once the first line is neither HTTP/1.x nor the preface.
func (f *firstLine) look(b []byte) bool {
	for _, x := range b {
		i := f.seen
		f.seen++
		if f.pre {
			if x == h2Preface[i] {
				if f.seen == len(h2Preface) {
					f.done = true
					return true
				}
				f.push(x)
				continue
			}
			f.pre = false
		}
		if x == '\n' {
			f.done = true
			line := bytes.TrimSuffix(f.tail[len(f.tail)-min(i, len(f.tail)):], []byte("\r"))
			return bytes.HasSuffix(line, []byte(" HTTP/1.1")) || bytes.HasSuffix(line, []byte(" HTTP/1.0"))
		}
		f.push(x)
	}
	return true
}

func (f *firstLine) push(x byte) {
	copy(f.tail[:], f.tail[1:])
	f.tail[len(f.tail)-1] = x
}

// CloseWrite lets an HTTP/2 connection's GOAWAY reach the client before
// the close.
func (c *limitConn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return nil
}

// SyscallConn exposes the socket: the transport watches the connections of
// the HTTP/1.1 event streams it took over through their descriptors, where
// a connection without one costs a goroutine for as long as it is open.
// Only taken-over connections are watched so, long past their first line.
func (c *limitConn) SyscallConn() (syscall.RawConn, error) {
	if sc, ok := c.Conn.(syscall.Conn); ok {
		return sc.SyscallConn()
	}
	return nil, errors.ErrUnsupported
}

func (c *limitConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(func() { c.l.open.Add(-1) })
	return err
}

// throttle lets one log line per interval through and counts the rest, so
// a flood of refusals cannot flood the log.
type throttle struct {
	every time.Duration
	mu    sync.Mutex
	next  time.Time
	quiet int
}

// allow reports whether to log now and how many were suppressed since.
func (t *throttle) allow(now time.Time) (ok bool, suppressed int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if now.Before(t.next) {
		t.quiet++
		return false, 0
	}
	t.next = now.Add(t.every)
	s := t.quiet
	t.quiet = 0
	return true, s
}
