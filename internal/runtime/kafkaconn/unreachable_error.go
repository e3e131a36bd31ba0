package kafkaconn

import (
	"fmt"
	"strings"
	"time"
)

// UnreachableError means the cluster could not be used within the timeout:
// no broker answered, or it answered but refused us (TLS or SASL failure).
// Err holds the cause.
type UnreachableError struct {
	Servers []string
	Timeout time.Duration
	Err     error
}

func (e *UnreachableError) Error() string {
	return fmt.Sprintf("cannot reach Kafka at %s within %s: %v", strings.Join(e.Servers, ","), e.Timeout, e.Err)
}

func (e *UnreachableError) Unwrap() error { return e.Err }
