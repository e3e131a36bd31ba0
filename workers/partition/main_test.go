package partition_test

import (
	"os"
	"strings"
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

func benchmarking() bool {
	for _, a := range os.Args[1:] {
		if strings.HasPrefix(a, "-test.bench=") && a != "-test.bench=" {
			return true
		}
	}
	return false
}
