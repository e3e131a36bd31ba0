package service_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/twmb/franz-go/pkg/kfake"

	"kmirror/internal/testing/testdb"
	"kmirror/service"
)

// newService returns a Service on a fresh database whose mirrors' source is
// an in-process cluster with topics orders (3 partitions) and payments (1).
func newService(t *testing.T) (*service.Control, *pgxpool.Pool, string) {
	t.Helper()
	return newServiceOn(t, kfake.SeedTopics(3, "orders"), kfake.SeedTopics(1, "payments"))
}

// newServiceOn is newService with a source cluster of the given options.
func newServiceOn(t *testing.T, source ...kfake.Opt) (*service.Control, *pgxpool.Pool, string) {
	t.Helper()
	pool := testdb.Pool(t)
	kafka, err := kfake.NewCluster(source...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(kafka.Close)
	svc, err := service.NewControl(service.Config{Pool: pool, Catalog: service.KafkaCatalog(2 * time.Second),
		Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	return svc, pool, strings.Join(kafka.ListenAddrs(), ",")
}

func count(t *testing.T, pool *pgxpool.Pool, sql string, args ...any) int {
	t.Helper()
	var n int
	if err := pool.QueryRow(t.Context(), sql, args...).Scan(&n); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
	return n
}

// TestDesiredStateRules checks the desired-state table cell by cell: for
// each current desired state of a topic and each action, whether the action
// applies (and to which state it moves the topic) or is a conflict that
// changes nothing.
func TestDesiredStateRules(t *testing.T) {
	t.Parallel()
	ctx := t.Context()

	type action struct {
		name   string
		do     func(ctx context.Context, svc *service.Control, mirror string) (service.TopicsResult, error)
		target service.DesiredState // desired state after success
		event  string
	}
	actions := []action{
		{"add", func(ctx context.Context, svc *service.Control, m string) (service.TopicsResult, error) {
			return svc.AddTopics(ctx, m, service.AddTopicsInput{Topic: "orders"})
		}, service.DesiredMirroring, service.EventTopicsAdded},
		{"pause", func(ctx context.Context, svc *service.Control, m string) (service.TopicsResult, error) {
			return svc.PauseTopics(ctx, m, "orders")
		}, service.DesiredPaused, service.EventTopicsPaused},
		{"resume", func(ctx context.Context, svc *service.Control, m string) (service.TopicsResult, error) {
			return svc.ResumeTopics(ctx, m, "orders")
		}, service.DesiredMirroring, service.EventTopicsResumed},
		{"remove", func(ctx context.Context, svc *service.Control, m string) (service.TopicsResult, error) {
			return svc.RemoveTopics(ctx, m, "orders")
		}, service.DesiredStopped, service.EventTopicsRemoved},
	}
	// setup brings a fresh topic to each current desired state.
	setup := map[service.DesiredState][]string{
		service.DesiredMirroring: {"add"},
		service.DesiredPaused:    {"add", "pause"},
		service.DesiredStopped:   {"add", "remove"},
	}
	// allowed[current] lists the actions that apply; every other cell is a conflict.
	allowed := map[service.DesiredState][]string{
		service.DesiredMirroring: {"pause", "remove"},
		service.DesiredPaused:    {"resume", "remove"},
		service.DesiredStopped:   {"add"},
	}

	cells := 0
	for _, current := range []service.DesiredState{service.DesiredMirroring, service.DesiredPaused, service.DesiredStopped} {
		for _, act := range actions {
			cells++
			// Each cell has its own database: one topic can be mirrored by
			// one mirror at a time.
			svc, pool, bootstrap := newService(t)
			mirror := fmt.Sprintf("%s-%s", current, act.name)
			if _, err := svc.CreateMirror(ctx, service.MirrorInput{Name: mirror,
				Source: service.SourceInput{BootstrapServers: bootstrap}}, service.WriteOpts{}); err != nil {
				t.Fatal(err)
			}
			for _, step := range setup[current] {
				i := slices.IndexFunc(actions, func(a action) bool { return a.name == step })
				if _, err := actions[i].do(ctx, svc, mirror); err != nil {
					t.Fatalf("setup %s: %v", step, err)
				}
			}
			want := slices.Contains(allowed[current], act.name)
			t.Run(string(current)+"/"+act.name, func(t *testing.T) {
				t.Parallel()
				desired := func() service.DesiredState {
					var s service.DesiredState
					if err := pool.QueryRow(ctx, `SELECT desired_state FROM mirror_topics WHERE mirror = $1 AND topic = 'orders'`,
						mirror).Scan(&s); err != nil {
						t.Fatal(err)
					}
					return s
				}
				if got := desired(); got != current {
					t.Fatalf("set up as %s, want %s", got, current)
				}
				events := count(t, pool, `SELECT count(*) FROM events WHERE mirror = $1`, mirror)
				outbox := count(t, pool, `SELECT count(*) FROM outbox WHERE mirror = $1`, mirror)
				parts := count(t, pool, `SELECT count(*) FROM mirror_partitions WHERE mirror = $1`, mirror)

				res, err := act.do(ctx, svc, mirror)
				if want {
					if err != nil {
						t.Fatalf("%s of a %s topic: %v, want success", act.name, current, err)
					}
					if res.Mirror != mirror || res.Action != act.name || !slices.Equal(res.Topics, []string{"orders"}) {
						t.Fatalf("result %+v", res)
					}
					if got := desired(); got != act.target {
						t.Fatalf("desired %s after %s, want %s", got, act.name, act.target)
					}
					var kind string
					if err := pool.QueryRow(ctx, `SELECT kind FROM events WHERE mirror = $1 ORDER BY id DESC LIMIT 1`, mirror).Scan(&kind); err != nil {
						t.Fatal(err)
					}
					if kind != act.event {
						t.Fatalf("last event %s, want %s", kind, act.event)
					}
					events++
					outbox++
				} else {
					var cf *service.ConflictError
					if !errors.As(err, &cf) {
						t.Fatalf("%s of a %s topic: %v (%T), want a *service.ConflictError", act.name, current, err, err)
					}
					if !strings.Contains(cf.Detail, "cannot "+act.name) || !strings.Contains(cf.Detail, "orders is "+string(current)) {
						t.Fatalf("conflict detail %q", cf.Detail)
					}
					if len(cf.Topics) != 1 || cf.Topics[0] != (service.TopicState{Topic: "orders", DesiredState: current}) {
						t.Fatalf("conflict topics %+v", cf.Topics)
					}
					if got := desired(); got != current {
						t.Fatalf("desired %s after a refused %s, want %s unchanged", got, act.name, current)
					}
				}
				if got := count(t, pool, `SELECT count(*) FROM events WHERE mirror = $1`, mirror); got != events {
					t.Fatalf("events %d, want %d", got, events)
				}
				if got := count(t, pool, `SELECT count(*) FROM outbox WHERE mirror = $1`, mirror); got != outbox {
					t.Fatalf("outbox rows %d, want %d", got, outbox)
				}
				if got := count(t, pool, `SELECT count(*) FROM mirror_partitions WHERE mirror = $1`, mirror); got != parts {
					t.Fatalf("partition rows %d, want %d unchanged", got, parts)
				}
			})
		}
	}
	if cells != 12 {
		t.Fatalf("covered %d cells, want 12", cells)
	}
}

// newServiceWithMirror is newService with mirror m1 created over its
// cluster (topics orders and payments).
func newServiceWithMirror(t *testing.T) (*service.Control, *pgxpool.Pool) {
	t.Helper()
	svc, pool, bootstrap := newService(t)
	if _, err := svc.CreateMirror(t.Context(), service.MirrorInput{Name: "m1",
		Source: service.SourceInput{BootstrapServers: bootstrap}}, service.WriteOpts{}); err != nil {
		t.Fatal(err)
	}
	return svc, pool
}

// TestTopicActionErrors checks the domain errors the API maps to problems.
func TestTopicActionErrors(t *testing.T) {
	t.Parallel()
	svc, pool := newServiceWithMirror(t)
	ctx := t.Context()

	var nf *service.NotFoundError
	if _, err := svc.PauseTopics(ctx, "nope", "orders"); !errors.As(err, &nf) || nf.Kind != "mirror" {
		t.Fatalf("pause on an unknown mirror: %v", err)
	}
	if _, err := svc.AddTopics(ctx, "nope", service.AddTopicsInput{Topic: "orders"}); !errors.As(err, &nf) || nf.Kind != "mirror" {
		t.Fatalf("add on an unknown mirror: %v", err)
	}
	if _, err := svc.AddTopics(ctx, "m1", service.AddTopicsInput{Topic: "nothing"}); !errors.As(err, &nf) || nf.Kind != "match" {
		t.Fatalf("add matching nothing: %v", err)
	}
	if _, err := svc.RemoveTopics(ctx, "m1", "orders"); !errors.As(err, &nf) || nf.Kind != "match" {
		t.Fatalf("remove matching nothing: %v", err)
	}
	var verr *service.ValidationError
	if _, err := svc.AddTopics(ctx, "m1", service.AddTopicsInput{Topic: "("}); !errors.As(err, &verr) || verr.Fields[0].Field != "topic" {
		t.Fatalf("add with a bad pattern: %v", err)
	}
	// Internal topics never match, even with a catch-all pattern.
	res, err := svc.AddTopics(ctx, "m1", service.AddTopicsInput{Topic: ".*"})
	if err != nil || !slices.Equal(res.Topics, []string{"orders", "payments"}) {
		t.Fatalf("add .*: %+v, %v", res, err)
	}
	if n := count(t, pool, `SELECT count(*) FROM mirror_partitions WHERE mirror = 'm1'`); n != 4 {
		t.Fatalf("%d partition rows, want 4", n)
	}

	// A source that does not answer: unavailable, naming it, nothing written.
	_, err = svc.CreateMirror(ctx, service.MirrorInput{Name: "down",
		Source: service.SourceInput{BootstrapServers: "127.0.0.1:1"}}, service.WriteOpts{})
	var un *service.UnavailableError
	if !errors.As(err, &un) || !strings.Contains(un.Detail, "127.0.0.1:1") {
		t.Fatalf("create with an unreachable source: %v", err)
	}
	if n := count(t, pool, `SELECT count(*) FROM mirrors WHERE name = 'down'`); n != 0 {
		t.Fatal("unreachable mirror was stored")
	}
}

func TestNewRequiresPoolAndCatalog(t *testing.T) {
	if _, err := service.NewControl(service.Config{Catalog: service.KafkaCatalog(time.Second)}); err == nil || !strings.Contains(err.Error(), "Pool") {
		t.Fatalf("New without a pool: %v", err)
	}
	if _, err := service.NewControl(service.Config{Pool: &pgxpool.Pool{}}); err == nil || !strings.Contains(err.Error(), "Catalog") {
		t.Fatalf("New without a catalog: %v", err)
	}
}
