package partition_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"io"
	"math"
	"os"
	"regexp"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/klauspost/compress/zstd"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"kmirror/internal/devenv/devcluster"
	"kmirror/internal/devenv/procstat"
	"kmirror/internal/testing/tamperproxy"
	"kmirror/repo"
	"kmirror/service"
	"kmirror/workers/workertest"
)

// hostileCase is a source broker that answers a partition's fetches with a
// batch Kafka would never serve.
type hostileCase struct {
	name string
	// batches returns the partition's records as the broker sends them
	// for every fetch from offset 10 on (the genuine log holds offsets 0
	// to 29): a batch at offset 10.
	batches func(t *testing.T) []byte
	// check matches what the partition's error must name.
	check string
}

// Genuine records before the source turns hostile, and after.
const (
	hostileBefore = 10
	hostileAfter  = 20
)

// TestScenarioHostileSourceBatches: a source that sends a bad batch
// (F3, F4, F5 of issue 45) fails the partition within 5 s with an error
// naming the partition, the offset and the check, copies nothing of the
// batch nor after it, keeps kmirror's memory within 100 MB, retries with
// back-off (a handful of fetches, not a storm), and leaves the other
// partition of the mirror, and another mirror of the same source, copying.
// kfake holds the genuine records; mirror m reaches it through a
// tamperproxy that puts the bad batch in place of hostile/0's records from
// offset 10 on.
func TestScenarioHostileSourceBatches(t *testing.T) {
	t.Parallel()
	for _, c := range []hostileCase{
		// The bomb fails the copy's re-encoding, and once the partition
		// retries, alignment's read of the source's record 9 (a kgo
		// consumer, bounded alike, answered the bomb as well).
		{name: "zstd bomb", check: "decompress past the bound|decompresses to more than", batches: func(t *testing.T) []byte {
			// One record of 256 MiB of zeros, a few kilobytes compressed,
			// in a batch whose offsets have a gap (so it is re-encoded).
			return zstdBomb(t, hostileBefore, 256<<20)
		}},
		{name: "2^31-1 records", check: "2147483647 records", batches: func(t *testing.T) []byte {
			return tamperedBatch(t, hostileBefore, func(h *kmsg.RecordBatch) { h.NumRecords = math.MaxInt32 })
		}},
		{name: "2^31 offsets", check: "not below the high watermark", batches: func(t *testing.T) []byte {
			return tamperedBatch(t, hostileBefore, func(h *kmsg.RecordBatch) {
				h.NumRecords, h.LastOffsetDelta = math.MaxInt32, math.MaxInt32-1
			})
		}},
		{name: "offset jump", check: "not below the high watermark", batches: func(t *testing.T) []byte {
			return tamperedBatch(t, hostileBefore, func(h *kmsg.RecordBatch) { h.FirstOffset += 1_000_000_000_000 })
		}},
		{name: "negative offset delta", check: "negative lastOffsetDelta", batches: func(t *testing.T) []byte {
			return tamperedBatch(t, hostileBefore, func(h *kmsg.RecordBatch) { h.LastOffsetDelta = -1 })
		}},
		{name: "empty batch", check: "before the position", batches: func(t *testing.T) []byte {
			// A batch of no records covering offset 10 (as compaction
			// leaves them): it moves the position once, and the next
			// fetch, from 11, gets it again.
			return tamperedBatch(t, hostileBefore, func(h *kmsg.RecordBatch) { h.NumRecords, h.Records = 0, nil })
		}},
		{name: "partial batch", check: "would hold it whole", batches: func(t *testing.T) []byte {
			b := tamperedBatch(t, hostileBefore, func(*kmsg.RecordBatch) {})
			return b[:len(b)/2]
		}},
		{name: "partial batch larger than max bytes", check: "would hold it whole", batches: func(t *testing.T) []byte {
			// Claims 2 MiB (more than the 1 MiB asked): asked again once
			// with room for it, and sent partial again.
			b := tamperedBatch(t, hostileBefore, func(*kmsg.RecordBatch) {})
			binary.BigEndian.PutUint32(b[8:], 2<<20)
			return b
		}},
	} {
		t.Run(c.name, func(t *testing.T) { hostileBatches(t, c) })
	}
}

func hostileBatches(t *testing.T, c hostileCase) {
	env := newEngineEnv(t, devcluster.Config{})
	if err := env.Clusters.Source.CreateTopic("hostile", 2, nil); err != nil {
		t.Fatal(err)
	}
	if err := env.Clusters.Source.CreateTopic("calm", 1, nil); err != nil {
		t.Fatal(err)
	}
	src := workertest.Plain(env.Clusters.SourceAddr())
	for _, p := range []int32{0, 1} {
		workertest.ProduceRecords(t, src, seq("hostile", p, "before", hostileBefore)...)
	}
	workertest.ProduceRecords(t, src, seq("calm", 0, "before", hostileBefore)...)
	id := env.sourceTopicID("hostile")
	// armed: kfake's answers for hostile/0 that hold records from offset
	// 10 on are replaced by the bad batch; hostile/1 stays genuine.
	var armed atomic.Bool
	var answered atomic.Int64
	hwm := int64(hostileBefore + hostileAfter)
	// Built once, before memory is measured: the bomb is a second of zstd
	// work.
	bad := c.batches(t)
	proxy := tamperproxy.New(t, env.Clusters.SourceAddr(), func(resp *kmsg.FetchResponse) tamperproxy.Fault {
		if !armed.Load() {
			return tamperproxy.Forward
		}
		for i := range resp.Topics {
			rt := &resp.Topics[i]
			if rt.Topic != "hostile" && rt.TopicID != id {
				continue
			}
			for j := range rt.Partitions {
				if rp := &rt.Partitions[j]; rp.Partition == 0 && len(rp.RecordBatches) > 0 {
					answered.Add(1)
					rp.HighWatermark, rp.LastStableOffset, rp.RecordBatches = hwm, hwm, bad
				}
			}
		}
		return tamperproxy.Forward
	})
	ends := startHostileMirrors(t, env, proxy.Addr())

	mem := measureMemory(t)
	armed.Store(true)
	start := time.Now()
	for _, p := range []int32{0, 1} {
		workertest.ProduceRecords(t, src, seq("hostile", p, "after", hostileAfter)...)
	}
	workertest.ProduceRecords(t, src, seq("calm", 0, "after", hostileAfter)...)
	p := env.waitPartition("m", "hostile", 0, 5*time.Second, "FAILED naming the check", func(p repo.Partition) bool {
		return p.State == service.StateFailed
	})
	t.Logf("FAILED after %v: %s", time.Since(start).Round(time.Millisecond), p.Error)
	for _, want := range []string{"hostile/0", "offset", c.check} {
		if !regexp.MustCompile(want).MatchString(p.Error) {
			t.Errorf("the error %q does not name %q", p.Error, want)
		}
	}
	// The partition's neighbour in the mirror and the other mirror copy on.
	n := hostileBefore + hostileAfter
	workertest.WaitFor(t, 20*time.Second, "hostile/1 and mirror m2 to copy on", func() (bool, string) {
		e := ends()
		return e == fmt.Sprintf("hostile %d/%d, calm %d", hostileBefore, n, n), e
	})
	if r := env.Partition("m", "hostile", 1); r.State != service.StateMirroring || r.Error != "" {
		t.Errorf("hostile/1: %s", describePartition(r))
	}
	// Retries go on with back-off: a few fetches in 3 s, not a storm.
	failedAt := answered.Load()
	workertest.HoldsFor(t, 3*time.Second, "nothing of the bad batch reaches the destination", func() (bool, string) {
		e := ends()
		return strings.HasPrefix(e, fmt.Sprintf("hostile %d/", hostileBefore)), e
	})
	if n := answered.Load() - failedAt; n > 30 {
		t.Errorf("%d fetches of the bad partition in the 3 s after it failed; retries must back off", n)
	}
	mem.check()
	t.Logf("%d fetch answers carried the bad batch", answered.Load())
}

// memoryUse is the process's memory when a hostile case began.
type memoryUse struct {
	t   *testing.T
	os  procstat.Memory
	sys uint64
}

// measureMemory notes the process's peak resident memory and what Go has
// taken from the system, after a collection.
func measureMemory(t *testing.T) memoryUse {
	t.Helper()
	runtime.GC()
	m := memoryUse{t: t}
	var st runtime.MemStats
	runtime.ReadMemStats(&st)
	m.sys = st.Sys
	var err error
	if m.os, err = procstat.ReadMemory(os.Getpid()); err != nil {
		t.Fatal(err)
	}
	return m
}

// check fails the test if the process's peak resident memory (VmHWM) grew
// by more than 100 MB since measureMemory, and logs Go's own figure.
func (m memoryUse) check() {
	m.t.Helper()
	now, err := procstat.ReadMemory(os.Getpid())
	if err != nil {
		m.t.Fatal(err)
	}
	var st runtime.MemStats
	runtime.ReadMemStats(&st)
	if grew := now.Peak - m.os.Peak; grew > 100<<20 && !raceEnabled {
		m.t.Errorf("the process's peak resident memory grew by %d MB; at most 100 MB", grew>>20)
	}
	m.t.Logf("peak resident memory %d → %d MB; Go's memory from the system %d → %d MB",
		m.os.Peak>>20, now.Peak>>20, m.sys>>20, st.Sys>>20)
}

// tamperedBatch is a genuine-looking batch of one record at base, its
// header changed by tamper, with a CRC that holds (a hostile broker can
// compute one).
func tamperedBatch(t *testing.T, base int64, tamper func(*kmsg.RecordBatch)) []byte {
	t.Helper()
	r := kmsg.Record{Key: []byte("forged"), Value: []byte("forged value")}
	body := r.AppendTo(nil)[1:]
	records := append(binary.AppendVarint(nil, int64(len(body))), body...)
	h := kmsg.RecordBatch{FirstOffset: base, PartitionLeaderEpoch: 0, Magic: 2, LastOffsetDelta: 0,
		FirstTimestamp: 1000, MaxTimestamp: 1000, ProducerID: -1, ProducerEpoch: -1, FirstSequence: -1,
		NumRecords: 1, Records: records}
	tamper(&h)
	return sealBatch(h)
}

// sealBatch encodes a batch with its length and CRC.
func sealBatch(h kmsg.RecordBatch) []byte {
	out := h.AppendTo(nil)
	binary.BigEndian.PutUint32(out[8:], uint32(len(out)-12))
	binary.BigEndian.PutUint32(out[17:], crc32.Checksum(out[21:], crc32.MakeTable(crc32.Castagnoli)))
	return out
}

// zstdBomb is a zstd batch at base of one record whose value is size
// zero bytes, with lastOffsetDelta 1 (an offset gap, so kmirror re-encodes
// it rather than copy it whole). The frame is written streaming, so the
// test never holds the zeros itself.
func zstdBomb(t *testing.T, base int64, size int) []byte {
	t.Helper()
	// A record: length, attributes, timestamp and offset deltas, key
	// (null), value length, value, header count.
	var head []byte
	head = append(head, 0)                        // attributes
	head = binary.AppendVarint(head, 0)           // timestamp delta
	head = binary.AppendVarint(head, 0)           // offset delta
	head = binary.AppendVarint(head, -1)          // null key
	head = binary.AppendVarint(head, int64(size)) // value length
	tail := binary.AppendVarint(nil, 0)           // no headers
	length := len(head) + size + len(tail)
	var frame bytes.Buffer
	zw, err := zstd.NewWriter(&frame, zstd.WithEncoderConcurrency(1))
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range [][]byte{binary.AppendVarint(nil, int64(length)), head} {
		if _, err := zw.Write(b); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := io.CopyN(zw, zeros{}, int64(size)); err != nil {
		t.Fatal(err)
	}
	if _, err := zw.Write(tail); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return sealBatch(kmsg.RecordBatch{FirstOffset: base, Magic: 2, Attributes: int16(kgo.CodecZstd), LastOffsetDelta: 1,
		FirstTimestamp: 1000, MaxTimestamp: 1000, ProducerID: -1, ProducerEpoch: -1, FirstSequence: -1,
		NumRecords: 1, Records: frame.Bytes()})
}

type zeros struct{}

func (zeros) Read(p []byte) (int, error) {
	clear(p)
	return len(p), nil
}

// startHostileMirrors starts mirror m of topic hostile through the hostile
// broker at proxy and mirror m2 of topic calm straight from the source,
// waits until both copied the first records, and returns a description of
// the destination's ends.
func startHostileMirrors(t *testing.T, env *engineEnv, proxy string) (ends func() string) {
	t.Helper()
	ctx := context.Background()
	if _, err := env.Svc.CreateMirror(ctx, service.MirrorInput{Name: "m",
		Source: service.SourceInput{BootstrapServers: proxy}}, service.WriteOpts{}); err != nil {
		t.Fatal(err)
	}
	if _, err := env.Svc.AddTopics(ctx, "m", service.AddTopicsInput{Topic: "hostile"}); err != nil {
		t.Fatal(err)
	}
	env.CreateMirror("m2", "calm")
	env.StartInstance("i1")
	dst := workertest.Plain(env.Clusters.DestinationAddr())
	ends = func() string {
		h, c := workertest.EndOffsets(t, dst, "hostile"), workertest.EndOffsets(t, dst, "calm")
		return fmt.Sprintf("hostile %d/%d, calm %d", h[0], h[1], c[0])
	}
	workertest.WaitFor(t, 20*time.Second, "both mirrors to copy the first records", func() (bool, string) {
		e := ends()
		return e == fmt.Sprintf("hostile %d/%d, calm %d", hostileBefore, hostileBefore, hostileBefore), e
	})
	return ends
}
