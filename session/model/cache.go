package model

import "sync"

// Cache is per-conversation state that protocols keep between requests: a
// session holds one and passes it on every Request. Each protocol keeps its
// own entry under a key of its own type, so a conversation that moves to
// another provider keeps both. Safe for concurrent use; the zero value is
// ready.
type Cache struct {
	mu sync.Mutex
	m  map[any]any
}

// Load returns the entry under key, made by mk on first use. A nil Cache
// returns nil.
func (c *Cache) Load(key any, mk func() any) any {
	if c == nil {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	v, ok := c.m[key]
	if !ok {
		if c.m == nil {
			c.m = map[any]any{}
		}
		v = mk()
		c.m[key] = v
	}
	return v
}
