package kafkawire

import (
	"math/bits"
	"sync"
	"sync/atomic"
)

// BufferPool lends the buffers large answers are read into, and takes each
// back when its last holder releases it. A fresh buffer is zeroed by the
// runtime before the answer overwrites it, which for a batch copier's fetch
// responses was a sixth of its CPU; a lent one is not.
type BufferPool struct {
	mu     sync.Mutex
	free   map[int][]*Buffer // by size class, a power of two
	idle   int               // bytes in free
	lent   atomic.Int64
	poison bool
}

// PoisonReleased makes the pools made after it is set overwrite each
// buffer given back, so that a test whose holder released a buffer too
// early sends or reads garbage instead of passing by luck. Tests only.
var PoisonReleased bool

// Buffers up to minPooled bytes are made afresh (zeroing them costs
// little); maxIdleBytes bounds the bytes a pool keeps unused.
const (
	minPooled    = 64 << 10
	maxIdleBytes = 64 << 20
)

// NewBufferPool returns an empty pool.
func NewBufferPool() *BufferPool {
	return &BufferPool{free: map[int][]*Buffer{}, poison: PoisonReleased}
}

// Lent is how many buffers are out: a holder that never releases shows
// here (its buffer is then the collector's, not lost).
func (p *BufferPool) Lent() int64 { return p.lent.Load() }

// Buffer is a lent buffer, held once by whoever got it. Whoever passes it
// on (or keeps its bytes past the call that handed them over) retains it
// first; each holder releases it once. A nil *Buffer is one not lent: its
// Retain and Release do nothing.
type Buffer struct {
	b    []byte
	refs atomic.Int32
	pool *BufferPool
}

// get returns a buffer of at least n bytes, held once.
func (p *BufferPool) get(n int) ([]byte, *Buffer) {
	if p == nil || n <= minPooled {
		return make([]byte, n), nil
	}
	class := 1 << bits.Len(uint(n-1))
	p.mu.Lock()
	var b *Buffer
	if l := p.free[class]; len(l) > 0 {
		b = l[len(l)-1]
		p.free[class] = l[:len(l)-1]
		p.idle -= class
	}
	p.mu.Unlock()
	if b == nil {
		b = &Buffer{b: make([]byte, class), pool: p}
	}
	b.refs.Store(1)
	p.lent.Add(1)
	return b.b[:n], b
}

// Retain adds a holder.
func (b *Buffer) Retain() {
	if b != nil {
		b.refs.Add(1)
	}
}

// Release drops a holder; the last one gives the buffer back, after which
// its bytes must not be touched.
func (b *Buffer) Release() {
	if b == nil {
		return
	}
	switch n := b.refs.Add(-1); {
	case n == 0:
		b.pool.put(b)
	case n < 0:
		panic("kafkawire: buffer released more often than held")
	}
}

func (p *BufferPool) put(b *Buffer) {
	p.lent.Add(-1)
	if p.poison {
		for i := range b.b {
			b.b[i] = 0xa5
		}
	}
	class := len(b.b)
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.idle+class > maxIdleBytes {
		return // the collector has it
	}
	p.free[class] = append(p.free[class], b)
	p.idle += class
}
