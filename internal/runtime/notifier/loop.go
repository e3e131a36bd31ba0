package notifier

import (
	"context"
	"time"
)

// Loop runs fn each time sub fires and every interval in any case (a
// notification can be missed while the LISTEN connection is down), until
// ctx ends. A nil sub is a plain ticker.
func Loop(ctx context.Context, interval time.Duration, sub *Subscription, fn func(ctx context.Context)) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-sub.C():
		}
		fn(ctx)
	}
}
