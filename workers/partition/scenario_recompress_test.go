package partition_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"kmirror/internal/devenv/devcluster"
	"kmirror/internal/kafka/recordbatch"
	"kmirror/service"
	"kmirror/workers/workertest"
)

// TestScenarioBatchCopyRecompresses: with mirror.compression.type set to a
// codec, every copied batch is stored with it, whatever the source used;
// set back to source while the mirror runs, the next batches keep their
// own codec again. The records stay exact throughout.
func TestScenarioBatchCopyRecompresses(t *testing.T) {
	t.Parallel()
	env := newEngineEnv(t, devcluster.Config{})
	if err := env.Clusters.Source.CreateTopic("orders", 2, nil); err != nil {
		t.Fatal(err)
	}
	addr := env.Clusters.SourceAddr()
	for i, c := range []kgo.CompressionCodec{kgo.NoCompression(), kgo.GzipCompression(), kgo.Lz4Compression()} {
		produceBatch(t, addr, c, "", false, i*20)
	}
	ctx := context.Background()
	zstd := "zstd"
	if _, err := env.Svc.CreateMirror(ctx, service.MirrorInput{Name: "m",
		Source: service.SourceInput{BootstrapServers: addr},
		Config: map[string]string{service.CfgCompressionType: zstd}}, service.WriteOpts{}); err != nil {
		t.Fatal(err)
	}
	if _, err := env.Svc.AddTopics(ctx, "m", service.AddTopicsInput{Topic: "orders"}); err != nil {
		t.Fatal(err)
	}
	env.StartInstance("i1")
	env.WaitStates("m", service.StateMirroring, 20*time.Second)
	workertest.WaitMirrored(t, env.Env, "orders", 2, 20*time.Second)
	dst := env.Clusters.DestinationAddr()
	for p := int32(0); p < 2; p++ {
		if got := destinationCodecs(t, dst, "orders", p, 60); !allCodec(got, recordbatch.Zstd) {
			t.Fatalf("orders/%d: destination batches %v, want zstd only", p, got)
		}
	}

	// Back to the source's codecs while the mirror runs.
	if _, err := env.Svc.UpdateMirror(ctx, "m", service.MirrorPatch{Config: map[string]*string{service.CfgCompressionType: nil}},
		service.WriteOpts{}); err != nil {
		t.Fatal(err)
	}
	// The PATCH reaches the instance through the desired-state cache: a
	// batch copied before that is still zstd, so batches are written until
	// the last of each partition arrives as lz4.
	records := 60
	workertest.WaitFor(t, 20*time.Second, "a batch copied with its own codec after the PATCH", func() (bool, string) {
		produceBatch(t, addr, kgo.Lz4Compression(), "", false, records)
		records += 20
		workertest.WaitMirrored(t, env.Env, "orders", 2, 20*time.Second)
		// Each partition's session picks the change up on its own: wait
		// for both (one ending in lz4 while the other's last batch was
		// still copied as zstd failed a CI run).
		for p := int32(0); p < 2; p++ {
			if got := destinationCodecs(t, dst, "orders", p, records); got[len(got)-1] != recordbatch.LZ4 {
				return false, fmt.Sprintf("orders/%d: destination batches %v", p, got)
			}
		}
		return true, ""
	})
	for p := int32(0); p < 2; p++ {
		got := destinationCodecs(t, dst, "orders", p, records)
		i := slices.Index(got, recordbatch.LZ4)
		if i < 3 || !allCodec(got[:i], recordbatch.Zstd) || !allCodec(got[i:], recordbatch.LZ4) {
			t.Fatalf("orders/%d: destination batches %v, want zstd, then the source's lz4", p, got)
		}
	}
}

func allCodec(cs []recordbatch.Codec, c recordbatch.Codec) bool {
	return len(cs) > 0 && !slices.ContainsFunc(cs, func(x recordbatch.Codec) bool { return x != c })
}
