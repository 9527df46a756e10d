package server

import (
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
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
		return &limitConn{Conn: c, l: l}, nil
	}
}

type limitConn struct {
	net.Conn
	l    *limitListener
	once sync.Once
}

// CloseWrite lets net/http half-close a connection it ends after an
// answer, so the answer reaches the client before the close (see
// net/http's closeWriteAndWait).
func (c *limitConn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return nil
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
