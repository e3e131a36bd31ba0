package testnet

import (
	"net"
	"sync"
	"testing"

	"github.com/twmb/franz-go/pkg/kfake"
)

// BehindProxy is a kfake option that puts the cluster's broker behind a
// Proxy and makes it advertise the proxy's address, so that every
// connection to it (bootstrap and broker alike) goes through the proxy and
// a cut reaches them all. The returned function gives the proxy once the
// cluster has started (nil before).
func BehindProxy(tb testing.TB) (kfake.Opt, func() *Proxy) {
	var (
		mu    sync.Mutex
		proxy *Proxy
	)
	opt := kfake.ListenFn(func(network, _ string) (net.Listener, error) {
		ln, err := net.Listen(network, "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		p := NewProxy(tb, ln.Addr().String())
		mu.Lock()
		proxy = p
		mu.Unlock()
		return advertised{Listener: ln, addr: p.Addr()}, nil
	})
	return opt, func() *Proxy {
		mu.Lock()
		defer mu.Unlock()
		return proxy
	}
}

// advertised is a listener that names another address (its proxy's).
type advertised struct {
	net.Listener
	addr string
}

func (a advertised) Addr() net.Addr {
	ta, err := net.ResolveTCPAddr("tcp", a.addr)
	if err != nil {
		panic(err)
	}
	return ta
}
