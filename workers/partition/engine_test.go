package partition_test

import (
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"kmirror/internal/devenv/devcluster"
	"kmirror/service"
	"kmirror/workers/workertest"
)

// TestMirrorStartAndFidelity: UNKNOWN → PREPARING → MIRRORING, and the
// destination then holds the same records (keys, nil keys and values,
// repeated headers, timestamps, every compression codec) in the same
// partitions and order.
func TestMirrorStartAndFidelity(t *testing.T) {
	t.Parallel()
	env := newEngineEnv(t, devcluster.Config{})
	if err := env.Clusters.Source.CreateTopic("orders", 3, nil); err != nil {
		t.Fatal(err)
	}
	codecs := []kgo.CompressionCodec{kgo.NoCompression(), kgo.GzipCompression(), kgo.SnappyCompression(),
		kgo.Lz4Compression(), kgo.ZstdCompression()}
	for _, c := range codecs[:2] {
		workertest.Produce(t, env.Clusters.SourceAddr(), "orders", 3, 20, c)
	}
	env.CreateMirror("m", "orders")
	env.StartInstance("i1")
	env.WaitStates("m", service.StateMirroring, 20*time.Second)
	for _, c := range codecs[2:] {
		workertest.Produce(t, env.Clusters.SourceAddr(), "orders", 3, 20, c)
	}
	workertest.WaitMirrored(t, env.Env, "orders", 3, 20*time.Second)
}
