package partition_test

import (
	"flag"
	"os"
	"testing"

	"kmirror/internal/devenv/devcluster"
	"kmirror/internal/runtime/kafkawire"
	"kmirror/internal/testing/testdb"
)

func TestMain(m *testing.M) {
	devcluster.ServeIfChild() // the benchmarks' kfake clusters, when re-executed as their process
	// Tests overwrite each fetch buffer given back, so that a batch whose
	// buffer was released before the producer was done with it lands as
	// garbage and fails the comparison; benchmarks keep the real cost.
	if !benchmarking() {
		kafkawire.PoisonReleased = true
	}
	os.Exit(testdb.Main(m))
}

// benchmarking reports whether the run was given -test.bench.
func benchmarking() bool {
	flag.Parse()
	f := flag.Lookup("test.bench")
	return f != nil && f.Value.String() != ""
}
