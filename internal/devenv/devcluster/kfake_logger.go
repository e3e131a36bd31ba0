package devcluster

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/twmb/franz-go/pkg/kfake"
)

// kfakeLogger routes kfake's printf-style logs into slog. kfake's info level
// is broker internals (group joins, unhandled requests), so it goes to
// debug; an operator of `kmirror dev` wants only warnings and errors.
type kfakeLogger struct{ l *slog.Logger }

func (k kfakeLogger) Logf(level kfake.LogLevel, format string, args ...any) {
	sl := slog.LevelDebug
	switch level {
	case kfake.LogLevelError:
		sl = slog.LevelError
	case kfake.LogLevelWarn:
		sl = slog.LevelWarn
	}
	ctx := context.Background()
	if k.l.Enabled(ctx, sl) {
		k.l.Log(ctx, sl, fmt.Sprintf(format, args...))
	}
}
