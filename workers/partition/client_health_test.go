package partition

import (
	"errors"
	"log/slog"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestClientHealth: what counts as a client's trouble, and what ends it,
// on a clock the test moves.
func TestClientHealth(t *testing.T) {
	fetch, metadata := int16(kmsg.Fetch), int16(kmsg.Metadata)
	b1 := kgo.BrokerMetadata{NodeID: 1, Host: "10.0.0.1", Port: 9092}
	seed := kgo.BrokerMetadata{NodeID: -2147483648, Host: "seed", Port: 9092}
	ok := kgo.BrokerE2E{}
	failed := kgo.BrokerE2E{ReadErr: errors.New("garbage")}
	for _, tc := range []struct {
		name string
		run  func(h *clientHealth, advance func(time.Duration))
		// want is "" for no trouble, else the error: one message whatever
		// went wrong (a refused connection, a response that cannot be
		// read, no answer), as a user may see it.
		want string
	}{
		{"fetches fail while metadata is answered", func(h *clientHealth, advance func(time.Duration)) {
			for range 10 {
				h.OnBrokerWrite(b1, fetch, 1, 0, 0, nil)
				h.OnBrokerE2E(b1, fetch, failed)
				h.OnBrokerWrite(b1, metadata, 1, 0, 0, nil)
				h.OnBrokerE2E(b1, metadata, ok)
				advance(300 * time.Millisecond)
			}
		}, "cannot reach broker 10.0.0.1:9092"},
		{"a fetch answered ends the run", func(h *clientHealth, advance func(time.Duration)) {
			h.OnBrokerWrite(b1, fetch, 1, 0, 0, nil)
			h.OnBrokerE2E(b1, fetch, failed)
			advance(3 * time.Second)
			h.OnBrokerWrite(b1, fetch, 1, 0, 0, nil)
			h.OnBrokerE2E(b1, fetch, ok)
		}, ""},
		{"a fetch held past the grace", func(h *clientHealth, advance func(time.Duration)) {
			h.OnBrokerWrite(b1, fetch, 1, 0, 0, nil)
			advance(2600 * time.Millisecond)
		}, "cannot reach broker 10.0.0.1:9092"},
		{"a fetch held within the grace", func(h *clientHealth, advance func(time.Duration)) {
			h.OnBrokerWrite(b1, fetch, 1, 0, 0, nil)
			advance(2400 * time.Millisecond)
		}, ""},
		{"a held fetch's connection closed", func(h *clientHealth, advance func(time.Duration)) {
			h.OnBrokerWrite(b1, fetch, 1, 0, 0, nil)
			advance(time.Second)
			h.OnBrokerDisconnect(b1, nil)
			advance(2 * time.Second)
		}, ""},
		{"connecting fails", func(h *clientHealth, advance func(time.Duration)) {
			for range 10 {
				h.OnBrokerConnect(b1, 0, nil, errors.New("refused"))
				advance(300 * time.Millisecond)
			}
		}, "cannot reach broker 10.0.0.1:9092"},
		{"a seed left behind once the brokers answer", func(h *clientHealth, advance func(time.Duration)) {
			h.OnBrokerConnect(seed, 0, nil, errors.New("refused"))
			advance(3 * time.Second)
			h.OnBrokerWrite(b1, metadata, 1, 0, 0, nil)
			h.OnBrokerE2E(b1, metadata, ok)
		}, ""},
		{"a run with no failure for long is over", func(h *clientHealth, advance func(time.Duration)) {
			h.OnBrokerConnect(b1, 0, nil, errors.New("refused"))
			advance(failureRunExpiry + time.Second)
		}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			now := time.Unix(1_000_000, 0)
			h := newClientHealth(500*time.Millisecond, slog.New(slog.DiscardHandler))
			h.now = func() time.Time { return now }
			tc.run(h, func(d time.Duration) { now = now.Add(d) })
			_, err := h.trouble(troubleAfter)
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("trouble %v, want none", err)
			case tc.want != "" && (err == nil || err.Error() != tc.want):
				t.Fatalf("trouble %v, want %q", err, tc.want)
			}
		})
	}
}
