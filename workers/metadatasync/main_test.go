package metadatasync_test

import (
	"os"
	"testing"

	"kmirror/internal/testing/testdb"
)

func TestMain(m *testing.M) { os.Exit(testdb.Main(m)) }
