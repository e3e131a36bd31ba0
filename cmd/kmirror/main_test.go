package main

import (
	"os"
	"testing"

	"kmirror/internal/devenv/devcluster"
	"kmirror/internal/testing/testdb"
)

func TestMain(m *testing.M) {
	devcluster.ServeIfChild() // the control-plane benchmark's clusters, when re-executed as their process
	burnIfChild()             // its CPU burner (KMIRROR_BENCH_BURN)
	os.Exit(testdb.Main(m))
}
