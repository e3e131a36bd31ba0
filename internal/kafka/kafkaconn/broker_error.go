package kafkaconn

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// A broker kmirror cannot speak Kafka with reads the same in every error a
// user sees, whatever is at its address: a closed port, a host that does
// not answer, a database, a web server, or something that answers with
// bytes that are no Kafka response. A source's brokers advertise the
// addresses kmirror connects to, so errors that told these apart would make
// kmirror a port scanner for whoever controls a source's metadata. The
// server log keeps the detail.

// CannotSpeak reports whether err says a broker could not be spoken to:
// anything but a Kafka error code a broker answered with (a SASL refusal
// among them: that broker speaks Kafka), kmirror's own credentials failing
// before a broker was asked (a token endpoint's refusal), and the caller's
// own cancellation.
func CannotSpeak(err error) bool {
	if err == nil {
		return false
	}
	var ke *kerr.Error
	var ce *credentialsError
	if errors.As(err, &ke) || errors.As(err, &ce) {
		return false
	}
	return !errors.Is(err, context.Canceled) && !errors.Is(err, kgo.ErrClientClosed)
}

// CannotReachError is the one error for brokers that could not be spoken
// to: the broker's host:port when it is known, else the cluster's
// bootstrap servers.
type CannotReachError struct{ Addrs []string }

func (e *CannotReachError) Error() string {
	if len(e.Addrs) == 1 {
		return "cannot reach broker " + e.Addrs[0]
	}
	return "cannot reach the brokers at " + strings.Join(e.Addrs, ",")
}

// BrokerAddr is a broker's host:port as kgo names it.
func BrokerAddr(meta kgo.BrokerMetadata) string {
	return net.JoinHostPort(meta.Host, strconv.Itoa(int(meta.Port)))
}

// BrokerWatch is a kgo hook that logs why a client could not speak to a
// broker: the errors users see (Public) leave that out.
type BrokerWatch struct{ log *slog.Logger }

var (
	_ kgo.HookBrokerConnect = (*BrokerWatch)(nil)
	_ kgo.HookBrokerE2E     = (*BrokerWatch)(nil)
)

// NewBrokerWatch returns a BrokerWatch that logs to log (nil: slog's
// default logger).
func NewBrokerWatch(log *slog.Logger) *BrokerWatch {
	if log == nil {
		log = slog.Default()
	}
	return &BrokerWatch{log: log}
}

// OnBrokerConnect implements kgo.HookBrokerConnect.
func (w *BrokerWatch) OnBrokerConnect(meta kgo.BrokerMetadata, _ time.Duration, _ net.Conn, err error) {
	if err != nil {
		w.log.Warn("cannot reach broker", "broker", BrokerAddr(meta), "err", err)
	}
}

// OnBrokerE2E implements kgo.HookBrokerE2E.
func (w *BrokerWatch) OnBrokerE2E(meta kgo.BrokerMetadata, key int16, e2e kgo.BrokerE2E) {
	if err := e2e.Err(); err != nil {
		w.log.Warn("cannot reach broker", "broker", BrokerAddr(meta), "request", key, "err", err)
	}
}

// Public returns err as a user may see it: when err says a broker could
// not be spoken to, the one message for that, naming the cluster's
// bootstrap servers (which broker failed, and how, is in the log);
// otherwise err.
func Public(err error, servers []string) error {
	if !CannotSpeak(err) {
		return err
	}
	return &CannotReachError{Addrs: servers}
}

// credentialsError is kmirror's own credentials failing before a broker is
// asked (an OAuth token, AWS credentials): no broker's answer, so it is
// shown as it is.
type credentialsError struct{ err error }

func (e *credentialsError) Error() string { return e.err.Error() }
func (e *credentialsError) Unwrap() error { return e.err }
