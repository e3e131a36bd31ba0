package kafkaconn

import (
	"fmt"
	"strings"
	"time"
)

// UnreachableError means the cluster could not be used within the timeout:
// no broker answered, or it answered but refused us (TLS or SASL failure).
// Err holds the cause. Its message tells a Kafka refusal (SASL) but not
// what else answered (CannotSpeak): that is for the log (Detail).
type UnreachableError struct {
	Servers []string
	Timeout time.Duration
	Err     error
}

func (e *UnreachableError) Error() string {
	if CannotSpeak(e.Err) {
		return fmt.Sprintf("cannot reach Kafka at %s within %s", strings.Join(e.Servers, ","), e.Timeout)
	}
	return fmt.Sprintf("cannot reach Kafka at %s within %s: %v", strings.Join(e.Servers, ","), e.Timeout, e.Err)
}

// Detail is the message with the cause, for the server log.
func (e *UnreachableError) Detail() string {
	return fmt.Sprintf("cannot reach Kafka at %s within %s: %v", strings.Join(e.Servers, ","), e.Timeout, e.Err)
}

func (e *UnreachableError) Unwrap() error { return e.Err }
