package service

import (
	"context"
	"time"
)

// WaitForTopicsWoken lets a test wake a wait itself, as the notifier does
// on a state change.
func (s *Control) WaitForTopicsWoken(ctx context.Context, res TopicsResult, d time.Duration, wake <-chan struct{}) (WaitResult, error) {
	return s.waitForTopics(ctx, res, d, wake)
}
