package testnet

import (
	"net"
	"testing"
	"time"
)

func TestBlackholeAcceptsAndNeverAnswers(t *testing.T) {
	b := NewBlackhole(t)
	c, err := net.Dial("tcp", b.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	for deadline := time.Now().Add(5 * time.Second); b.Accepted() != 1; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("accepted %d connections, want 1", b.Accepted())
		}
	}
	if _, err := c.Write([]byte("hello")); err != nil {
		t.Fatal(err)
	}
	_ = c.SetReadDeadline(time.Now().Add(50 * time.Millisecond))
	if n, err := c.Read(make([]byte, 1)); n != 0 || err == nil {
		t.Fatalf("read %d bytes, %v: want a timeout", n, err)
	}
}
