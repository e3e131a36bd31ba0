package partition_test

import (
	"os"
	"testing"

	"kmirror/internal/devenv/devcluster"
	"kmirror/internal/testing/testdb"
)

func TestMain(m *testing.M) {
	devcluster.ServeIfChild() // the benchmarks' kfake clusters, when re-executed as their process
	os.Exit(testdb.Main(m))
}
