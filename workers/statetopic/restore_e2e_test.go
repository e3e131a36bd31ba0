package statetopic

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"kmirror/internal/devenv/devcluster"
	"kmirror/internal/kafka/kafkaconn"
	"kmirror/internal/testing/testdb"
	"kmirror/repo"
	"kmirror/service"
	"kmirror/workers/workertest"
)

// The clusters of the end-to-end restore test authenticate and authorize:
// kmirror's principal is a super user on both.
const (
	e2eMech, e2eUser, e2ePass = "SCRAM-SHA-256", "admin", "admin-secret"
	e2eTopic                  = "orders"
	e2ePartitions             = 2
)

var e2eSecurity = kafkaconn.Security{Protocol: "SASL_PLAINTEXT", SASLMechanism: e2eMech,
	SASLUsername: e2eUser, SASLPassword: e2ePass}

// TestRestoreEverythingThatMatters mirrors a transactional source whose
// offsets diverge from the destination's, with committed consumer groups
// and synced literal and prefixed ACLs; then loses the database, restores
// it from __mirror_state into an empty one and restarts. The restored
// control plane answers translations, commits group offsets and removes
// dropped ACLs exactly as the one that kept its database would (its
// database is kept as the control, read only).
func TestRestoreEverythingThatMatters(t *testing.T) {
	t.Parallel()
	secure := []kfake.Opt{kfake.EnableSASL(), kfake.Superuser(e2eMech, e2eUser, e2ePass), kfake.EnableACLs()}
	env := newEngineEnv(t, devcluster.Config{SourceOpts: secure, DestinationOpts: secure})
	srcConn := kafkaconn.Config{BootstrapServers: []string{env.Clusters.SourceAddr()}, Security: e2eSecurity}
	dstConn := kafkaconn.Config{BootstrapServers: []string{env.Clusters.DestinationAddr()}, Security: e2eSecurity}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	if err := env.Clusters.Source.CreateTopic(e2eTopic, e2ePartitions, nil); err != nil {
		t.Fatal(err)
	}
	produceTransactions(t, ctx, srcConn)
	src, dst := adminOf(t, srcConn), adminOf(t, dstConn)

	// Source ACLs: literal and prefixed, on the topic and on groups.
	aliceOrders := workertest.ReadACL(kadm.NewACLs().Topics(e2eTopic), kadm.ACLPatternLiteral, "User:alice")
	daveOrd := workertest.ReadACL(kadm.NewACLs().Topics("ord"), kadm.ACLPatternPrefixed, "User:dave")
	aliceApp := workertest.ReadACL(kadm.NewACLs().Groups("app"), kadm.ACLPatternLiteral, "User:alice")
	daveAppPfx := workertest.ReadACL(kadm.NewACLs().Groups("app-"), kadm.ACLPatternPrefixed, "User:dave")
	for _, b := range []*kadm.ACLBuilder{aliceOrders, daveOrd, aliceApp, daveAppPfx} {
		workertest.MustCreateACLs(t, ctx, src, b)
	}
	// Local destination ACLs that kmirror must never touch, one of them
	// identical to a source ACL that the sync will create and later drop.
	workertest.MustCreateACLs(t, ctx, dst, workertest.ReadACL(kadm.NewACLs().Topics(e2eTopic), kadm.ACLPatternLiteral, "User:bob"))
	workertest.MustCreateACLs(t, ctx, dst, workertest.ReadACL(kadm.NewACLs().Topics("or"), kadm.ACLPatternPrefixed, "User:erin"))

	// Committed source groups, in the middle of the diverging offsets.
	commitGroup(t, ctx, src, "app", map[int32]int64{0: 7, 1: 13})
	commitGroup(t, ctx, src, "app-billing", map[int32]int64{0: 16, 1: 3})

	// The original control plane: mirror, sync, publish.
	if _, err := env.Svc.CreateMirror(ctx, service.MirrorInput{Name: "m", Source: service.SourceInput{
		BootstrapServers: env.Clusters.SourceAddr(), SecurityProtocol: e2eSecurity.Protocol, SASLMechanism: e2eMech,
		SASLUsername: e2eUser, SASLPassword: e2ePass}}, service.WriteOpts{}); err != nil {
		t.Fatal(err)
	}
	if _, err := env.Svc.AddTopics(ctx, "m", service.AddTopicsInput{Topic: e2eTopic}); err != nil {
		t.Fatal(err)
	}
	orig := env.StartInstanceOpts("i1", workertest.InstanceOpts{Dest: dstConn, Sync: true})
	relay := startRelayTo(t, env.Pool, dstConn)
	srcEnds := endOffsets(t, ctx, src)
	waitCheckpointsAt(t, env.Pool, srcEnds)
	res := syncNow(t, env.Svc, "m")
	if !res.OK {
		t.Fatalf("sync pass: %+v", res)
	}
	controlACLs, err := repo.SyncedACLsList(ctx, env.Pool, "m")
	if err != nil || len(controlACLs) != 4 {
		t.Fatalf("the control tracks ACLs %+v (%v), want the 4 source ACLs", controlACLs, err)
	}
	waitPublished(t, ctx, env.Pool, dstConn)
	controlRows := map[int32]repo.Partition{}
	for _, p := range env.Partitions("m") {
		controlRows[p.Partition] = p
	}

	// The database is lost: the instance and the relay die with it.
	orig.Crash()
	relay.Stop()
	control := env.Svc // the database that was not lost, for the answers only

	fresh := testdb.Pool(t)
	svc, err := service.NewControl(service.Config{Pool: fresh, Catalog: service.KafkaCatalog(3 * time.Second), Secrets: workertest.SecretKeys})
	if err != nil {
		t.Fatal(err)
	}
	latest, err := ReadState(ctx, dstConn)
	if err != nil {
		t.Fatal(err)
	}
	rres, err := svc.Restore(ctx, latest)
	if err != nil {
		t.Fatal(err)
	}
	if rres.Mirrors != 1 || rres.Partitions != e2ePartitions || rres.SyncedACLs != 4 || rres.OffsetRuns == 0 ||
		len(rres.Lowered) != 0 || len(rres.NeedCredentials) != 1 || !slices.Equal(rres.NeedCredentials[0].Missing, []string{"sasl_password"}) {
		t.Fatalf("restore = %+v", rres)
	}
	t.Logf("restored: %+v", rres)

	// restore --verify agrees with the good restore.
	snap, err := service.DecodeState(latest)
	if err != nil {
		t.Fatal(err)
	}
	ends, err := DestinationEnds(ctx, dstConn, snap)
	if err != nil {
		t.Fatal(err)
	}
	rep, err := svc.VerifyRestore(ctx, snap, ends)
	if err != nil || len(rep.Differences) != 0 {
		t.Fatalf("verify of a good restore: %v\n%v\n%v", err, rep.Lines, rep.Differences)
	}

	// Translation answers exactly as before, for every source offset.
	assertSameTranslations(t, ctx, control, svc, srcEnds)

	// Without its secret the mirror waits as needs_credentials: nothing is
	// leased, so no partition fails on authentication.
	m, err := svc.GetMirror(ctx, "m")
	if err != nil || m.State != service.MirrorNeedsCredentials {
		t.Fatalf("restored mirror %+v %v", m, err)
	}
	if d, err := repo.LeasesCountDemand(ctx, fresh, "i2", time.Second); err != nil || d.ActivePartitions != 0 || d.Mirrors != 0 {
		t.Fatalf("lease demand while the mirror needs credentials: %+v %v, want none", d, err)
	}
	restored := &engineEnv{workertest.EnvOver(t, fresh, svc, env.Clusters)}
	restored.StartInstanceOpts("i2", workertest.InstanceOpts{Dest: dstConn, Sync: true})
	startRelayTo(t, fresh, dstConn)
	workertest.HoldsFor(t, time.Second, "nothing leased or failed while the mirror needs credentials", func() (bool, string) {
		for _, p := range restored.Partitions("m") {
			if p.LeaseOwner != "" || p.State == service.StateFailed {
				return false, fmt.Sprintf("%s/%d owner %q state %s", p.Topic, p.Partition, p.LeaseOwner, p.State)
			}
		}
		return true, ""
	})
	pass := e2ePass
	m, err = svc.UpdateMirror(ctx, "m", service.MirrorPatch{Source: &service.SourcePatch{SASLPassword: &pass}}, service.WriteOpts{})
	if err != nil || m.State != service.MirrorReady || len(m.MissingCredentials) != 0 {
		t.Fatalf("PATCH the password: %+v %v", m, err)
	}
	restored.WaitStates("m", service.StateMirroring, 30*time.Second)
	waitCheckpointsAt(t, fresh, srcEnds)
	assertSameTranslations(t, ctx, control, svc, srcEnds)
	// The pass that runs when the restored plane takes the metadata lease
	// is done before the source changes, so the changes are the next
	// pass's to find.
	workertest.WaitFor(t, 30*time.Second, "the restored plane's first sync pass", func() (bool, string) {
		m, err := svc.GetMirror(ctx, "m")
		if err != nil {
			return false, err.Error()
		}
		return len(m.LastSync) > 0, "no pass yet"
	})

	// Group offsets: new commits on the source, synced by the restored
	// plane, land where the control translates them.
	commitGroup(t, ctx, src, "app", map[int32]int64{0: 3, 1: 12})
	commitGroup(t, ctx, src, "app-new", map[int32]int64{0: 11, 1: 17})
	// An ACL of each pattern type dropped on the source.
	for _, b := range []*kadm.ACLBuilder{aliceOrders, daveOrd} {
		if _, err := src.DeleteACLs(ctx, b); err != nil {
			t.Fatal(err)
		}
	}
	res = syncNow(t, svc, "m")
	if !res.OK {
		t.Fatalf("sync pass after restore: %+v", res)
	}
	for _, g := range []string{"app", "app-billing", "app-new"} {
		committed, err := src.FetchOffsets(ctx, g)
		if err != nil {
			t.Fatal(err)
		}
		got, err := dst.FetchOffsets(ctx, g)
		if err != nil {
			t.Fatal(err)
		}
		for p := int32(0); p < e2ePartitions; p++ {
			srcAt, _ := committed.Lookup(e2eTopic, p)
			want, ok, err := env.Workers.TranslateGroupOffset(ctx, controlRows[p], srcAt.At)
			if err != nil || !ok {
				t.Fatalf("control translation of %s/%d@%d: %v %v", g, p, srcAt.At, ok, err)
			}
			dstAt, _ := got.Lookup(e2eTopic, p)
			if dstAt.At != want.DestinationOffset {
				t.Errorf("group %s partition %d: source %d committed at %d on the destination, the control says %d",
					g, p, srcAt.At, dstAt.At, want.DestinationOffset)
			}
		}
	}

	// ACLs: exactly the two dropped copies are gone; local ACLs stay.
	var deleted []string
	for _, it := range res.ACLs.Items {
		if it.Action == "deleted" {
			deleted = append(deleted, it.Name)
		} else {
			t.Errorf("unexpected ACL action %+v", it)
		}
	}
	slices.Sort(deleted)
	if want := []string{"TOPIC:ord:PREFIXED:User:dave:*:READ:ALLOW", "TOPIC:orders:LITERAL:User:alice:*:READ:ALLOW"}; !slices.Equal(deleted, want) {
		t.Fatalf("deleted ACLs %v, want %v", deleted, want)
	}
	tracked, err := repo.SyncedACLsList(ctx, fresh, "m")
	if err != nil {
		t.Fatal(err)
	}
	var wantTracked []repo.SyncedACL
	for _, a := range controlACLs {
		if a.ResourceType == "GROUP" {
			wantTracked = append(wantTracked, a)
		}
	}
	if !slices.Equal(tracked, wantTracked) {
		t.Fatalf("tracked after the drop %+v, want %+v", tracked, wantTracked)
	}
	left := describeACLs(t, ctx, dstConn)
	wantLeft := append([]string{
		"GROUP:app:LITERAL:User:alice:*:READ:ALLOW", "GROUP:app-:PREFIXED:User:dave:*:READ:ALLOW",
		"TOPIC:orders:LITERAL:User:bob:*:READ:ALLOW", "TOPIC:or:PREFIXED:User:erin:*:READ:ALLOW",
		"TOPIC:orders:LITERAL:User:*:*:WRITE:DENY", // the read-only ACL
	}, workertest.InternalTopicsACLStrings...) // kmirror's own topics, kmirror's
	for _, want := range wantLeft {
		if !slices.Contains(left, want) {
			t.Errorf("destination lost %s; it has %v", want, left)
		}
	}
	if len(left) != len(wantLeft) {
		t.Errorf("destination ACLs %v, want %d", left, len(wantLeft))
	}
}

// publishedMirror mirrors topic orders (2 partitions, 10 records each)
// with mirror m on one instance until both checkpoints are at 10 and
// __mirror_state has them, then stops the instance and the relay. It
// returns the world and the destination, where __mirror_state is.
func publishedMirror(t *testing.T, cfg devcluster.Config) (*engineEnv, kafkaconn.Config) {
	t.Helper()
	env := newEngineEnv(t, cfg)
	if err := env.Clusters.Source.CreateTopic("orders", 2, nil); err != nil {
		t.Fatal(err)
	}
	workertest.Produce(t, env.Clusters.SourceAddr(), "orders", 2, 10, kgo.NoCompression())
	env.CreateMirror("m", "orders")
	in := env.StartInstance("i1")
	dest := kafkaconn.Config{BootstrapServers: []string{env.Clusters.DestinationAddr()}}
	relay := startRelayTo(t, env.Pool, dest)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	waitCheckpointsAt(t, env.Pool, map[int32]int64{0: 10, 1: 10})
	waitPublished(t, ctx, env.Pool, dest)
	in.Stop()
	relay.Stop()
	return env, dest
}

// TestRestoreVerifyFindsAHandChangedCheckpoint: restore --verify passes on
// a good restore and fails on one whose checkpoint was changed by hand.
func TestRestoreVerifyFindsAHandChangedCheckpoint(t *testing.T) {
	t.Parallel()
	_, dest := publishedMirror(t, devcluster.Config{})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	verify := func(pool *pgxpool.Pool) service.VerifyReport {
		t.Helper()
		svc, err := service.NewControl(service.Config{Pool: pool, Catalog: service.KafkaCatalog(3 * time.Second)})
		if err != nil {
			t.Fatal(err)
		}
		latest, err := ReadState(ctx, dest)
		if err != nil {
			t.Fatal(err)
		}
		snap, err := service.DecodeState(latest)
		if err != nil {
			t.Fatal(err)
		}
		ends, err := DestinationEnds(ctx, dest, snap)
		if err != nil {
			t.Fatal(err)
		}
		rep, err := svc.VerifyRestore(ctx, snap, ends)
		if err != nil {
			t.Fatal(err)
		}
		return rep
	}
	fresh := testdb.Pool(t)
	svc, err := service.NewControl(service.Config{Pool: fresh, Catalog: service.KafkaCatalog(3 * time.Second)})
	if err != nil {
		t.Fatal(err)
	}
	latest, err := ReadState(ctx, dest)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := svc.Restore(ctx, latest); err != nil {
		t.Fatal(err)
	}
	if rep := verify(fresh); len(rep.Differences) != 0 {
		t.Fatalf("good restore: %v", rep.Differences)
	}
	// A run changed by hand, still contiguous: not as published.
	if _, err := fresh.Exec(ctx, `UPDATE offset_map_runs SET src_start = src_start + 1
		WHERE mirror = 'm' AND topic = 'orders' AND partition = 0`); err != nil {
		t.Fatal(err)
	}
	if rep := verify(fresh); len(rep.Differences) != 1 ||
		rep.Differences[0] != "offset maps: m/orders/0: 1 run(s) in the database differ from the 1 in __mirror_state" {
		t.Fatalf("differences %q, want partition 0's map", rep.Differences)
	}
	if _, err := fresh.Exec(ctx, `UPDATE offset_map_runs SET src_start = src_start - 1
		WHERE mirror = 'm' AND topic = 'orders' AND partition = 0`); err != nil {
		t.Fatal(err)
	}
	// A checkpoint moved by hand, ahead of the destination.
	if _, err := fresh.Exec(ctx, `UPDATE mirror_partitions SET src_next = src_next + 3, dst_next = dst_next + 3
		WHERE mirror = 'm' AND topic = 'orders' AND partition = 1`); err != nil {
		t.Fatal(err)
	}
	rep := verify(fresh)
	t.Logf("report:\n%s\n%s", strings.Join(rep.Lines, "\n"), strings.Join(rep.Differences, "\n"))
	if len(rep.Differences) != 2 || !strings.HasPrefix(rep.Differences[0], "checkpoints: m/orders/1:") ||
		!strings.HasPrefix(rep.Differences[1], "destination: m/orders/1: dst_next 13 is past the destination's end offset 10") {
		t.Fatalf("differences %q, want partition 1's checkpoint differing from the topic and ahead of the destination", rep.Differences)
	}
}

// produceTransactions writes to each partition of the source topic, through
// one transactional producer: 5 committed records, 5 aborted, 5 committed,
// then 3 plain ones. With the commit markers, source offsets run ahead of
// the destination's: 0-4, 12-16 and 18-20 are the 13 records mirrored.
func produceTransactions(t *testing.T, ctx context.Context, conn kafkaconn.Config) {
	t.Helper()
	tx, err := conn.NewClient(kgo.TransactionalID("restore-e2e"), kgo.DefaultProduceTopic(e2eTopic),
		kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Close()
	for b, commit := range []bool{true, false, true} {
		if err := tx.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		for p := int32(0); p < e2ePartitions; p++ {
			for i := 0; i < 5; i++ {
				if err := tx.ProduceSync(ctx, &kgo.Record{Partition: p, Key: []byte(fmt.Sprintf("b%d-%d", b, i)),
					Value: []byte(fmt.Sprintf("batch %d record %d", b, i))}).FirstErr(); err != nil {
					t.Fatal(err)
				}
			}
		}
		if err := tx.EndTransaction(ctx, kgo.TransactionEndTry(commit)); err != nil {
			t.Fatal(err)
		}
	}
	plain, err := conn.NewClient(kgo.DefaultProduceTopic(e2eTopic), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer plain.Close()
	for p := int32(0); p < e2ePartitions; p++ {
		for i := 0; i < 3; i++ {
			if err := plain.ProduceSync(ctx, &kgo.Record{Partition: p, Value: []byte(fmt.Sprintf("plain %d", i))}).FirstErr(); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// assertSameTranslations compares the translation of every source offset
// up to each partition's end.
func assertSameTranslations(t *testing.T, ctx context.Context, control, restored *service.Control, ends map[int32]int64) {
	t.Helper()
	for p := int32(0); p < e2ePartitions; p++ {
		for n := int64(0); n <= ends[p]; n++ {
			want, werr := control.Translate(ctx, "m", e2eTopic, p, n)
			got, gerr := restored.Translate(ctx, "m", e2eTopic, p, n)
			if (werr == nil) != (gerr == nil) || want != got {
				t.Fatalf("translate %d/%d: restored %+v (%v), control %+v (%v)", p, n, got, gerr, want, werr)
			}
		}
	}
	// The offsets diverge: the check is not trivially the identity.
	if tr, err := control.Translate(ctx, "m", e2eTopic, 0, 13); err != nil || tr.DestinationOffset != 6 {
		t.Fatalf("control translation of source 13: %+v %v, want destination 6", tr, err)
	}
}

// startRelayTo runs an outbox relay over pool to a destination.
func startRelayTo(t *testing.T, pool *pgxpool.Pool, dest kafkaconn.Config) *Relay {
	t.Helper()
	r, err := NewRelay(RelayConfig{Pool: pool, Partitions: 5, Destination: dest,
		Interval: 50 * time.Millisecond, CheckpointInterval: 300 * time.Millisecond, Logger: workertest.Logger()})
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(r.Stop)
	return r
}

// waitCheckpointsAt waits until every partition's checkpoint reached its
// source end offset.
func waitCheckpointsAt(t *testing.T, pool *pgxpool.Pool, ends map[int32]int64) {
	t.Helper()
	workertest.WaitFor(t, 30*time.Second, "checkpoints at the source ends", func() (bool, string) {
		ps, err := repo.PartitionsList(context.Background(), pool, repo.PartitionsListParams{Mirror: "m"})
		if err != nil {
			return false, err.Error()
		}
		desc := ""
		for _, p := range ps {
			if p.SrcNext == nil || *p.SrcNext != ends[p.Partition] {
				return false, fmt.Sprintf("%s partition %d at %v, want %d", desc, p.Partition, p.SrcNext, ends[p.Partition])
			}
		}
		return len(ps) > 0, "no partitions"
	})
}

// waitPublished waits until __mirror_state holds what the database holds:
// every partition's checkpoint and offset map, and the synced ACLs.
func waitPublished(t *testing.T, ctx context.Context, pool *pgxpool.Pool, dest kafkaconn.Config) {
	t.Helper()
	workertest.WaitFor(t, 30*time.Second, "state published", func() (bool, string) {
		latest, err := ReadState(ctx, dest)
		if err != nil {
			return false, err.Error()
		}
		snap, err := service.DecodeState(latest)
		if err != nil {
			return false, err.Error()
		}
		ps, err := repo.PartitionsList(ctx, pool, repo.PartitionsListParams{})
		if err != nil {
			return false, err.Error()
		}
		published := map[repo.PartitionID]service.PartitionRecord{}
		for _, p := range snap.Partitions {
			published[repo.PartitionID{Mirror: p.Mirror, Topic: p.Topic, Partition: p.Partition}] = p
		}
		runs, err := repo.OffsetRunsListAll(ctx, pool)
		if err != nil {
			return false, err.Error()
		}
		for _, p := range ps {
			id := repo.PartitionID{Mirror: p.Mirror, Topic: p.Topic, Partition: p.Partition}
			pr, ok := published[id]
			if !ok || pr.DstNext == nil || p.DstNext == nil || *pr.DstNext != *p.DstNext {
				return false, fmt.Sprintf("checkpoint of %v not published yet", id)
			}
			if !slices.Equal(snap.OffsetMaps[id], runs[id]) {
				return false, fmt.Sprintf("offset map of %v: %v published, %v in the database", id, snap.OffsetMaps[id], runs[id])
			}
		}
		mirrors, err := repo.MirrorsList(ctx, pool)
		if err != nil {
			return false, err.Error()
		}
		acls := 0
		for _, m := range mirrors {
			as, err := repo.SyncedACLsList(ctx, pool, m.Name)
			if err != nil {
				return false, err.Error()
			}
			acls += len(as)
		}
		pubACLs := 0
		for _, a := range snap.SyncedACLs {
			pubACLs += len(a.ACLs)
		}
		return pubACLs == acls, fmt.Sprintf("%d synced ACLs published, %d in the database", pubACLs, acls)
	})
}

func syncNow(t *testing.T, svc *service.Control, mirror string) service.SyncResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	res, err := svc.SyncMirror(ctx, mirror)
	if err != nil {
		t.Fatalf("sync %s: %v", mirror, err)
	}
	return res
}

func adminOf(t *testing.T, conn kafkaconn.Config) *kadm.Client {
	t.Helper()
	adm, err := conn.NewAdmin()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(adm.Close)
	return adm
}

func commitGroup(t *testing.T, ctx context.Context, adm *kadm.Client, group string, at map[int32]int64) {
	t.Helper()
	offs := kadm.Offsets{}
	for p, o := range at {
		offs.Add(kadm.Offset{Topic: e2eTopic, Partition: p, At: o, LeaderEpoch: -1})
	}
	res, err := adm.CommitOffsets(ctx, group, offs)
	if err == nil {
		err = res.Error()
	}
	if err != nil {
		t.Fatalf("commit %s on the source: %v", group, err)
	}
}

func endOffsets(t *testing.T, ctx context.Context, adm *kadm.Client) map[int32]int64 {
	t.Helper()
	ends, err := adm.ListEndOffsets(ctx, e2eTopic)
	if err != nil {
		t.Fatal(err)
	}
	out := map[int32]int64{}
	ends.Each(func(o kadm.ListedOffset) { out[o.Partition] = o.Offset })
	return out
}

// describeACLs lists every ACL of the cluster conn reaches (workertest.ACLStrings).
func describeACLs(t *testing.T, ctx context.Context, conn kafkaconn.Config) []string {
	t.Helper()
	cl, err := conn.NewClient()
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	return workertest.ACLStrings(t, ctx, cl)
}
