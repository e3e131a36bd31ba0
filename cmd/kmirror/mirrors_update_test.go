package main

import (
	"strings"
	"testing"
)

// TestMirrorsUpdate: --update sets and resets config keys and says what
// each is now; bad usage and a bad value change nothing.
func TestMirrorsUpdate(t *testing.T) {
	t.Parallel()
	e := newMirrorsEnv(t)
	e.mustMirrors(t, "Created mirror demo.\n", "--create", "--mirror", "demo", "--source-bootstrap", e.source,
		"--config", "mirror.metadata.refresh.interval.ms=10000")
	e.mustMirrors(t, "Updated mirror demo:\n"+
		"  mirror.metadata.refresh.interval.ms=30000 (default)\n"+
		"  schema.sync.interval.ms=5000 (set)\n",
		"--update", "--mirror", "demo", "--config", "schema.sync.interval.ms=5000", "--reset-config", "mirror.metadata.refresh.interval.ms")

	e.wantFailure(t, 1, []string{"schema.sync.interval.ms"}, "--update", "--mirror", "demo", "--config", "schema.sync.interval.ms=5")
	for _, args := range [][]string{
		{"--update", "--mirror", "demo"},
		{"--update", "--mirror", "demo", "--config", "a=1", "--reset-config", "a"},
		{"--update", "--config", "a=1"},
		{"--describe", "--reset-config", "a"},
	} {
		code, out, errOut := e.mirrors(t, args...)
		if code != 2 || out != "" || errOut == "" {
			t.Errorf("%s: exit %d, stdout %q, stderr %q; want a usage error", strings.Join(args, " "), code, out, errOut)
		}
	}
	// Still as the first update left it.
	e.mustMirrors(t, "Updated mirror demo:\n  schema.sync.interval.ms=5000 (set)\n",
		"--update", "--mirror", "demo", "--config", "schema.sync.interval.ms=5000")
}
