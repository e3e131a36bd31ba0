package kafkawire

import "testing"

// TestBufferPoolLendsAndTakesBack: a large buffer goes back when its last
// holder releases it and is lent again, not made afresh; a small one is
// never pooled; a buffer given back under poisoning is overwritten; one
// released more often than held panics.
func TestBufferPoolLendsAndTakesBack(t *testing.T) {
	p := &BufferPool{free: map[int][]*Buffer{}, poison: true}
	if _, b := p.get(1000); b != nil {
		t.Fatal("a 1000-byte answer was lent a pooled buffer")
	}
	bytes, b := p.get(100_000)
	if len(bytes) != 100_000 || cap(b.b) != 128<<10 {
		t.Fatalf("got %d bytes in a class of %d, want 100000 in 131072", len(bytes), cap(b.b))
	}
	bytes[0] = 1
	b.Retain() // a producer holds it too
	b.Release()
	if p.Lent() != 1 {
		t.Fatalf("lent %d after one of two holders released, want 1", p.Lent())
	}
	b.Release()
	if p.Lent() != 0 {
		t.Fatalf("lent %d after the last release, want 0", p.Lent())
	}
	if bytes[0] != 0xa5 {
		t.Fatal("a buffer given back under poisoning kept its bytes")
	}
	again, b2 := p.get(70_000)
	if b2 != b || &again[0] != &bytes[0] {
		t.Fatal("a buffer of the same class was made afresh instead of lent again")
	}
	b2.Release()
	defer func() {
		if recover() == nil {
			t.Fatal("releasing a buffer no one holds did not panic")
		}
	}()
	b2.Release()
}
