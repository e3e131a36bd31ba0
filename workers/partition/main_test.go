package partition_test

import (
	"os"
	"testing"

	"kmirror/internal/testdb"
)

func TestMain(m *testing.M) { os.Exit(testdb.Main(m)) }
