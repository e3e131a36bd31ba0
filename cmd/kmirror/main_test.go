package main

import (
	"os"
	"testing"

	"kmirror/internal/devenv/devcluster"
	"kmirror/internal/testing/testdb"
)

func TestMain(m *testing.M) {
	devcluster.ServeIfChild() // the control-plane benchmark's clusters, when re-executed as their process
	os.Exit(testdb.Main(m))
}
