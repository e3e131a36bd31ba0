package e2e

import (
	"bytes"
	"log/slog"
	"slices"
	"testing"
)

// TestDuplicateKeys checks the detector the server-process tests use on
// every log line, so that its silence there means something.
func TestDuplicateKeys(t *testing.T) {
	for _, c := range []struct {
		line string
		want []string
	}{
		{`{"a":1,"b":{"a":2}}`, nil},
		{`{"instance":"i1","msg":"x","instance":"i1"}`, []string{"instance"}},
		{`{"a":[{"k":1,"k":2}],"b":{"c":1,"c":2}}`, []string{"k", "c"}},
		{`not json`, nil},
	} {
		if got := duplicateKeys([]byte(c.line)); !slices.Equal(got, c.want) {
			t.Errorf("duplicateKeys(%s) = %v, want %v", c.line, got, c.want)
		}
	}
	// slog's JSON handler repeats an attribute given at two levels: an
	// instance id attached below the root logger as well is logged twice.
	var buf bytes.Buffer
	slog.New(slog.NewJSONHandler(&buf, nil)).With("instance", "i1").With("instance", "i1").Info("m")
	if got := duplicateKeys(bytes.TrimSpace(buf.Bytes())); !slices.Equal(got, []string{"instance"}) {
		t.Fatalf("slog line %s: duplicates %v, want [instance]", buf.String(), got)
	}
}
