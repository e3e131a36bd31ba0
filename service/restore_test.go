package service

import (
	"fmt"
	"slices"
	"testing"

	"kmirror/repo"
)

func ptr(n int64) *int64 { return &n }

// r is a run: src_start, dst_start, count.
func r(s, d, c int64) repo.OffsetRun { return repo.OffsetRun{SrcStart: s, DstStart: d, Count: c} }

// TestFitOffsetMap: restored runs are made to agree with the restored
// checkpoint, case by case.
func TestFitOffsetMap(t *testing.T) {
	cases := []struct {
		name             string
		state            PartitionState
		runs             []repo.OffsetRun
		src, dst         *int64
		want             []repo.OffsetRun
		wantSrc, wantDst int64
		lowered          bool
	}{
		{name: "no checkpoint, no map", runs: []repo.OffsetRun{r(0, 0, 5)}, want: nil},
		{name: "map ends at the checkpoint", runs: []repo.OffsetRun{r(0, 0, 5), r(6, 5, 5)}, src: ptr(11), dst: ptr(10),
			want: []repo.OffsetRun{r(0, 0, 5), r(6, 5, 5)}, wantSrc: 11, wantDst: 10},
		{name: "markers after the last record: the source end is past the map", runs: []repo.OffsetRun{r(0, 0, 5)}, src: ptr(6), dst: ptr(5),
			want: []repo.OffsetRun{r(0, 0, 5)}, wantSrc: 6, wantDst: 5},
		{name: "map past the checkpoint is cut at it", runs: []repo.OffsetRun{r(0, 0, 5), r(6, 5, 5), r(12, 10, 3)}, src: ptr(8), dst: ptr(7),
			want: []repo.OffsetRun{r(0, 0, 5), r(6, 5, 2)}, wantSrc: 8, wantDst: 7},
		{name: "map behind the checkpoint lowers it", runs: []repo.OffsetRun{r(0, 0, 5), r(6, 5, 2)}, src: ptr(11), dst: ptr(10),
			want: []repo.OffsetRun{r(0, 0, 5), r(6, 5, 2)}, wantSrc: 8, wantDst: 7, lowered: true},
		{name: "a PAUSED partition resumes without aligning: its checkpoint is kept", state: StatePaused,
			runs: []repo.OffsetRun{r(0, 0, 5), r(6, 5, 2)}, src: ptr(11), dst: ptr(10),
			want: []repo.OffsetRun{r(0, 0, 5), r(6, 5, 2)}, wantSrc: 11, wantDst: 10},
		{name: "an overlapping leftover run is dropped", runs: []repo.OffsetRun{r(0, 0, 5), r(3, 3, 10), r(6, 5, 5)}, src: ptr(11), dst: ptr(10),
			want: []repo.OffsetRun{r(0, 0, 5), r(6, 5, 5)}, wantSrc: 11, wantDst: 10},
		{name: "a run overlapping on the destination only is dropped", runs: []repo.OffsetRun{r(0, 0, 5), r(6, 4, 5), r(20, 5, 5)}, src: ptr(25), dst: ptr(10),
			want: []repo.OffsetRun{r(0, 0, 5), r(20, 5, 5)}, wantSrc: 25, wantDst: 10},
		{name: "checkpoint with no map is kept (nothing to fit)", src: ptr(7), dst: ptr(7), wantSrc: 7, wantDst: 7},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := PartitionRecord{State: c.state, SrcNext: c.src, DstNext: c.dst}
			got, lowered := fitOffsetMap(c.runs, &p)
			if !slices.Equal(got, c.want) || lowered != c.lowered {
				t.Fatalf("fit = %v lowered %v, want %v lowered %v", got, lowered, c.want, c.lowered)
			}
			if c.src != nil && (*p.SrcNext != c.wantSrc || *p.DstNext != c.wantDst) {
				t.Fatalf("checkpoint (%d, %d), want (%d, %d)", *p.SrcNext, *p.DstNext, c.wantSrc, c.wantDst)
			}
			if why := offsetMapProblem(got, p.DstNext); why != "" {
				t.Fatalf("a fitted map is not contiguous: %s", why)
			}
		})
	}
}

// TestOffsetMapProblem: what restore --verify calls not contiguous.
func TestOffsetMapProblem(t *testing.T) {
	cases := []struct {
		name string
		runs []repo.OffsetRun
		dst  *int64
		bad  bool
	}{
		{"empty", nil, nil, false},
		{"contiguous with source gaps", []repo.OffsetRun{r(0, 0, 5), r(6, 5, 5), r(20, 10, 1)}, ptr(11), false},
		{"ends before the checkpoint", []repo.OffsetRun{r(0, 0, 5)}, ptr(9), false},
		{"overlap on the source", []repo.OffsetRun{r(0, 0, 5), r(4, 5, 5)}, ptr(10), true},
		{"gap on the destination", []repo.OffsetRun{r(0, 0, 5), r(6, 6, 5)}, ptr(11), true},
		{"past the checkpoint", []repo.OffsetRun{r(0, 0, 5)}, ptr(4), true},
		{"a map without a checkpoint", []repo.OffsetRun{r(0, 0, 5)}, nil, true},
	}
	for _, c := range cases {
		if got := offsetMapProblem(c.runs, c.dst); (got != "") != c.bad {
			t.Errorf("%s: %q", c.name, got)
		}
	}
}

// TestOffsetMapRecords: a run belongs to the chunk of its first source
// offset, however far it reaches.
func TestOffsetMapRecords(t *testing.T) {
	w := OffsetMapChunkWidth
	id := repo.PartitionID{Mirror: "m", Topic: "t", Partition: 3}
	recs := OffsetMapRecords(id, []repo.OffsetRun{{SrcStart: 0, DstStart: 0, Count: 2 * w},
		{SrcStart: 2*w + 1, DstStart: 2 * w, Count: 1}, {SrcStart: 2*w + 3, DstStart: 2*w + 1, Count: 1},
		{SrcStart: 5 * w, DstStart: 2*w + 2, Count: 1}})
	var chunks []int64
	for _, rec := range recs {
		chunks = append(chunks, rec.Chunk)
		if rec.Mirror != "m" || rec.Topic != "t" || rec.Partition != 3 || rec.Version != RecordVersion {
			t.Fatalf("record %+v", rec)
		}
	}
	if !slices.Equal(chunks, []int64{0, 2, 5}) || len(recs[1].Runs) != 2 {
		t.Fatalf("chunks %v, records %+v", chunks, recs)
	}
	if k := OffsetMapKey("m", "t", 3, 5); k != "offsets/m/t/3/5" {
		t.Fatalf("key %s", k)
	}
}

// TestStillMissing: a restored mirror's secret stays missing until set, or
// until the source no longer uses it.
func TestStillMissing(t *testing.T) {
	both := []string{CredentialSASLPassword, CredentialTLSKey}
	cases := []struct {
		name string
		m    repo.Mirror
		want []string
	}{
		{"nothing set yet", repo.Mirror{Source: repo.Source{SASLMechanism: "PLAIN", TLSCertPEM: "cert"}, MissingCredentials: both}, both},
		{"password set", repo.Mirror{Source: repo.Source{SASLMechanism: "PLAIN", SASLPassword: "p", TLSCertPEM: "cert"}, MissingCredentials: both},
			[]string{CredentialTLSKey}},
		{"key set", repo.Mirror{Source: repo.Source{SASLMechanism: "PLAIN", TLSCertPEM: "cert", TLSKeyPEM: "key"}, MissingCredentials: both},
			[]string{CredentialSASLPassword}},
		{"SASL and the client certificate dropped", repo.Mirror{MissingCredentials: both}, []string{}},
		{"never missing", repo.Mirror{Source: repo.Source{SASLMechanism: "PLAIN"}}, nil},
	}
	for _, c := range cases {
		if got := stillMissing(c.m); len(got) != len(c.want) || (len(got) > 0 && !slices.Equal(got, c.want)) {
			t.Errorf("%s: %v, want %v", c.name, got, c.want)
		}
	}
}

// TestRestoredLastMirrored: a restored partition keeps its record's last
// mirrored offsets unless the fitted map ends before them; a record from
// before they were published takes the map's end.
func TestRestoredLastMirrored(t *testing.T) {
	cases := []struct {
		name     string
		rec      PartitionRecord
		fit      []repo.OffsetRun
		src, dst *int64
	}{
		{"nothing copied", PartitionRecord{}, nil, nil, nil},
		{"the record's, at the map's end", PartitionRecord{LastMirroredSrc: ptr(1234), LastMirroredDst: ptr(1229)},
			[]repo.OffsetRun{r(0, 0, 1000), r(1005, 1000, 230)}, ptr(1234), ptr(1229)},
		{"an old record: the map's end", PartitionRecord{}, []repo.OffsetRun{r(0, 0, 5), r(7, 5, 3)}, ptr(9), ptr(7)},
		{"a map cut short", PartitionRecord{LastMirroredSrc: ptr(20), LastMirroredDst: ptr(18)},
			[]repo.OffsetRun{r(0, 0, 5)}, ptr(4), ptr(4)},
		{"no map left: the record's", PartitionRecord{LastMirroredSrc: ptr(20), LastMirroredDst: ptr(18)}, nil, ptr(20), ptr(18)},
	}
	str := func(p *int64) string {
		if p == nil {
			return "nil"
		}
		return fmt.Sprint(*p)
	}
	for _, c := range cases {
		src, dst := restoredLastMirrored(c.rec, c.fit)
		if str(src) != str(c.src) || str(dst) != str(c.dst) {
			t.Errorf("%s: %s → %s, want %s → %s", c.name, str(src), str(dst), str(c.src), str(c.dst))
		}
	}
}
