package kafkaconn

import (
	"strings"
	"testing"
	"time"

	"kmirror/internal/testing/testnet"
)

// TestBrokerErrorsReadTheSame: whatever is at a broker's address, the error
// a user sees is the same: a closed port, a host that holds the connection
// and never answers, a web server, a database (here one that answers as
// PostgreSQL does to a startup packet it does not know) and a server that
// answers with noise. Errors that told them apart would make a source's
// advertised addresses a port scanner.
func TestBrokerErrorsReadTheSame(t *testing.T) {
	got := map[string]string{}
	for name, addr := range testnet.NotKafka(t) {
		t.Run(name, func(t *testing.T) {
			_, err := TopicPartitions(t.Context(), Config{BootstrapServers: []string{addr}}, time.Second)
			if err == nil {
				t.Fatal("no error")
			}
			got[name] = strings.ReplaceAll(err.Error(), addr, "ADDR")
			if p := Public(err, []string{addr}); p.Error() != "cannot reach broker "+addr {
				t.Errorf("Public: %v", p)
			}
		})
	}
	want := "cannot reach Kafka at ADDR within 1s"
	for name, msg := range got {
		if msg != want {
			t.Errorf("%s: %q, want %q", name, msg, want)
		}
	}
}
