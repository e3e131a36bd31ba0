package schemaregistry

import (
	"testing"

	"github.com/twmb/franz-go/pkg/sr"
	"github.com/twmb/franz-go/pkg/sr/srfake"

	"kmirror/internal/devenv/devregistry"
)

// newDestination returns a destination registry for a test: devregistry's,
// which adds to srfake the IMPORT mode, READONLY, contexts with their own
// ids and the faults the sync is tested against.
func newDestination(t *testing.T, opts ...srfake.Option) *devregistry.Registry {
	t.Helper()
	reg, err := devregistry.New(opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(reg.Close)
	return reg
}

// clientFor returns a kmirror client for a devregistry, built as production
// builds one.
func clientFor(t *testing.T, reg *devregistry.Registry) *sr.Client {
	t.Helper()
	cl, err := NewClient(Config{URLs: []string{reg.URL()}})
	if err != nil {
		t.Fatal(err)
	}
	return cl
}
