package server

import (
	"container/list"
	"crypto/tls"
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

// limitListener bounds the TCP connections open at once, and keeps a
// connection that has not authenticated from holding its place: such a
// connection is closed preAuth after its accept unless a request on it
// passed the guard by then (authenticated), whatever phase it is in — the
// TLS handshake, slow headers, a body the client never sends, an idle
// keep-alive after a refusal, an HTTP/2 connection whose requests were all
// refused — and when the bound is reached, a new connection takes the place
// of the oldest one still unauthenticated. Only when every open connection
// has authenticated is a new one closed at once, so a flood costs an accept
// and a close each and never the place of a client with the token.
type limitListener struct {
	net.Listener
	max     int
	preAuth time.Duration
	refused atomic.Int64
	evicted atomic.Int64
	expired atomic.Int64
	// onRefuse is told of each connection closed for the bound: refused at
	// accept, or evicted for a newer one (for a throttled log line).
	onRefuse func(remote net.Addr, evicted bool)
	// onAccept is told of each connection let in.
	onAccept func()

	mu     sync.Mutex
	open   int
	unauth list.List // of *limitConn not authenticated yet, oldest first
}

func (l *limitListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		lc := &limitConn{Conn: c, l: l}
		var evict *limitConn
		l.mu.Lock()
		if l.open >= l.max {
			if e := l.unauth.Front(); e != nil {
				evict = l.unauth.Remove(e).(*limitConn)
				evict.elem = nil
			}
		}
		admit := l.open < l.max || evict != nil
		if admit {
			l.open++
			lc.elem = l.unauth.PushBack(lc)
			lc.timer = time.AfterFunc(l.preAuth, lc.expire)
		}
		l.mu.Unlock()
		if evict != nil {
			l.evicted.Add(1)
			_ = evict.Close()
			if l.onRefuse != nil {
				l.onRefuse(evict.RemoteAddr(), true)
			}
		}
		if !admit {
			l.refused.Add(1)
			_ = c.Close()
			if l.onRefuse != nil {
				l.onRefuse(c.RemoteAddr(), false)
			}
			continue
		}
		if l.onAccept != nil {
			l.onAccept()
		}
		return lc, nil
	}
}

// Open is the number of connections open.
func (l *limitListener) Open() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.open
}

type limitConn struct {
	net.Conn
	l    *limitListener
	once sync.Once
	// elem is the connection's place in l.unauth until it authenticates
	// or closes; guarded by l.mu.
	elem *list.Element
	// timer is the deadline's, set at accept; guarded by l.mu.
	timer *time.Timer
	// authed is set once a request on it passed the guard.
	authed atomic.Bool
}

// authenticated marks c as a client's with the token: it keeps its place
// for as long as it is open.
func (c *limitConn) authenticated() {
	if c.authed.Swap(true) {
		return
	}
	c.l.mu.Lock()
	defer c.l.mu.Unlock()
	if c.elem != nil {
		c.l.unauth.Remove(c.elem)
		c.elem = nil
	}
	c.timer.Stop()
}

// expire closes c if it has not authenticated within its time.
func (c *limitConn) expire() {
	if c.authed.Load() {
		return
	}
	c.l.expired.Add(1)
	_ = c.Close()
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
	c.once.Do(func() {
		c.l.mu.Lock()
		c.timer.Stop()
		if c.elem != nil {
			c.l.unauth.Remove(c.elem)
			c.elem = nil
		}
		c.l.open--
		c.l.mu.Unlock()
	})
	return c.Conn.Close()
}

// connKey carries a request's connection in its context (ConnContext).
type connKey struct{}

// listenerConn finds the listener's connection under c, a TLS one
// included.
func listenerConn(c net.Conn) *limitConn {
	if tc, ok := c.(*tls.Conn); ok {
		c = tc.NetConn()
	}
	lc, _ := c.(*limitConn)
	return lc
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
