package service

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"kmirror/internal/kafka/kafkaconn"
	"kmirror/internal/kafka/preflight"
	"kmirror/internal/kafka/schemaregistry"
	"kmirror/repo"
)

// checkTimeout bounds a preflight check's requests to each cluster.
const checkTimeout = 10 * time.Second

// CheckInput says what CheckMirror checks.
type CheckInput struct {
	// Topic, an RE2 pattern as topics:add takes, checks the source topics
	// it matches; empty checks the mirror's topics.
	Topic string
	// ReplicationFactor is what the topics would be created with (nil:
	// the destination's default, or each topic's own).
	ReplicationFactor *int
}

// MirrorCheck is one preflight check.
type MirrorCheck struct {
	// Cluster is source or destination, or, for a mirror that names a
	// source Schema Registry, source registry or destination registry.
	Cluster string `json:"cluster" enums:"source,destination,source registry,destination registry"`
	// Check says what was checked.
	Check string `json:"check" example:"read topics"`
	// Status: pass; warn, a feature beside the copy will not work (config,
	// group offset or ACL sync, read-only enforcement); fail, the copy
	// will not (in a registry's row: the schemas' copy will not).
	Status string `json:"status" enums:"pass,warn,fail"`
	// Detail is what was found.
	Detail string `json:"detail" example:"not allowed on orders"`
	// Grant, when the status is not pass, says what to grant or change.
	Grant string `json:"grant,omitempty" example:"READ on topic orders"`
} // @name MirrorCheck

// CheckResult is a mirror's preflight.
type CheckResult struct {
	Mirror string `json:"mirror"`
	// Topics are the topics checked.
	Topics []string `json:"topics"`
	// Status is the worst of the checks'.
	Status string        `json:"status" enums:"pass,warn,fail"`
	Checks []MirrorCheck `json:"checks"`
} // @name MirrorCheckResult

// CheckMirror checks, against the mirror's source and this server's
// destination with their own credentials, what the mirror needs of them
// for its topics (or for the topics in.Topic matches): one row per check.
// A mirror that names a source Schema Registry gets rows for it and for the
// server's destination registry (registryChecks). Nothing is written, in
// the database or on either cluster; on the destination registry IMPORT
// mode is set on a probe subject that holds nothing and deleted again.
func (s *Control) CheckMirror(ctx context.Context, mirror string, in CheckInput) (CheckResult, error) {
	rf, err := replicationFactorOf(in.ReplicationFactor)
	if err != nil {
		return CheckResult{}, err
	}
	m, err := s.mirror(ctx, mirror)
	if err != nil {
		return CheckResult{}, err
	}
	conn, err := s.sourceConn(m)
	if err != nil {
		return CheckResult{}, err
	}
	registry, hasRegistry, err := s.sourceRegistry(m)
	if err != nil {
		return CheckResult{}, err
	}
	existing, err := topicsByName(ctx, s.pool, mirror)
	if err != nil {
		return CheckResult{}, err
	}
	var topics []string
	if in.Topic != "" {
		matched, err := s.matchSourceTopics(ctx, conn, mirror, in.Topic)
		if err != nil {
			return CheckResult{}, err
		}
		topics = sortedKeys(matched)
	} else {
		factors := map[int]bool{}
		for name, t := range existing {
			if t.DesiredState != DesiredStopped {
				topics = append(topics, name)
				factors[t.ReplicationFactor] = true
			}
		}
		slices.Sort(topics)
		// The topics' own factor when they share one; the destination's
		// default when they differ (one factor is checked).
		if in.ReplicationFactor == nil && len(factors) == 1 {
			for f := range factors {
				rf = f
			}
		}
	}
	checker := s.preflight
	if checker == nil {
		checker = KafkaPreflight()
	}
	// The registries are checked while the clusters are, so that they add
	// no time to the check's.
	var registryRows chan []preflight.Result
	if hasRegistry {
		registryRows = make(chan []preflight.Result, 1)
		go func() {
			registryRows <- registryChecks(ctx, registry, s.destRegistry, topics, SchemaSyncConfigOf(m.Config))
		}()
	}
	// Checked as a plain add of them would be: a destination topic that
	// holds records this mirror did not write fails.
	rows := checker.Check(ctx, conn, s.destination, preflightTopics(m.Config, topics, existing, false), rf)
	if registryRows != nil {
		rows = append(rows, <-registryRows...)
	}
	out := CheckResult{Mirror: mirror, Topics: topics, Status: string(preflight.Worst(rows)), Checks: []MirrorCheck{}}
	if out.Topics == nil {
		out.Topics = []string{}
	}
	for _, r := range rows {
		out.Checks = append(out.Checks, MirrorCheck{Cluster: r.Cluster, Check: r.Check, Status: string(r.Status),
			Detail: r.Detail, Grant: r.Grant})
	}
	return out, nil
}

// registryChecks checks the Schema Registries the schema sync of a mirror
// whose source registry is src uses: src with the mirror's credentials,
// and dst, the deployment's destination registry, with the server's (a
// warn row when there is none), for the mirror's topics. The two are
// checked at once, each within checkTimeout.
//
// topics:add does not run them: the schema sync catches up once a
// registry is fixed, and the destination's check sets a mode, which an add
// should not do each time.
func registryChecks(ctx context.Context, src schemaregistry.Config, dst *schemaregistry.Config, topics []string,
	cfg SchemaSyncConfig) []preflight.Result {
	if dst == nil {
		src.RequestTimeout = checkTimeout
		return append(preflight.CheckSourceRegistry(ctx, src, topics, cfg.SubjectRegex), preflight.Result{
			Cluster: preflight.DestinationRegistry, Check: "connect", Status: preflight.Warn,
			Detail: "this server has no destination Schema Registry: the mirror's schemas will not be copied until " +
				"the servers get --destination-schema-registry-url",
			Grant: "start every server with --destination-schema-registry-url (KMIRROR_DESTINATION_SCHEMA_REGISTRY_URL)"})
	}
	dstRows := make(chan []preflight.Result, 1)
	go func() {
		d := *dst
		d.RequestTimeout = checkTimeout
		dstRows <- preflight.CheckDestinationRegistry(ctx, d, cfg.Context)
	}()
	src.RequestTimeout = checkTimeout
	rows := preflight.CheckSourceRegistry(ctx, src, topics, cfg.SubjectRegex)
	return append(rows, <-dstRows...)
}

// Preflight checks a mirror's clusters for topics, created with
// replication factor rf: the rows of internal/runtime/preflight.
type Preflight interface {
	Check(ctx context.Context, source, destination kafkaconn.Config, topics []PreflightTopic, rf int) []preflight.Result
}

// PreflightTopic is a topic to check: its source name, the destination
// topic it is written to, and whether records already there are expected
// (preflight.Topic's RecordsExpected).
type PreflightTopic struct {
	Source          string
	Destination     string
	RecordsExpected bool
}

// preflightTopics names the destination topic of each source topic, as
// AddTopics would (destinationNames), and expects records in those that
// this mirror wrote (a row of its own, stopped ones too, names them), or
// in all of them when keep says the add keeps or replaces what is there
// (continue, recreate).
func preflightTopics(cfg map[string]string, names []string, existing map[string]repo.Topic, keep bool) []PreflightTopic {
	dests := destinationNames(cfg, names, existing)
	own := make(map[string]bool, len(existing))
	for _, t := range existing {
		own[t.DestTopic] = true
	}
	out := make([]PreflightTopic, len(names))
	for i, name := range names {
		out[i] = PreflightTopic{Source: name, Destination: dests[name], RecordsExpected: keep || own[dests[name]]}
	}
	return out
}

// KafkaPreflight checks the real clusters, bounding each one's requests
// to 10 s.
func KafkaPreflight() Preflight { return kafkaPreflight{} }

type kafkaPreflight struct{}

// Check runs the source's checks, then the destination's (a warn row
// when there is no destination to check).
func (kafkaPreflight) Check(ctx context.Context, source, destination kafkaconn.Config, topics []PreflightTopic, rf int) []preflight.Result {
	ctx, cancel := context.WithTimeout(ctx, 2*checkTimeout)
	defer cancel()
	creds := preflight.Credentials(ctx, "source", source.BootstrapServers, source.Security)
	src, err := source.NewClient(append(kafkaconn.ProbeOpts(checkTimeout), kgo.WithHooks(kafkaconn.NewBrokerWatch(nil)))...)
	if err != nil {
		return append(creds, preflight.Result{Cluster: "source", Check: "connect", Status: preflight.Fail, Detail: err.Error(),
			Grant: "check the mirror's source settings"})
	}
	defer src.Close()
	names := make([]string, len(topics))
	bySource := make(map[string]PreflightTopic, len(topics))
	for i, t := range topics {
		names[i], bySource[t.Source] = t.Source, t
	}
	rows, found, groups := preflight.Source(ctx, src, names)
	rows = append(creds, rows...)
	for i := range found {
		t := bySource[found[i].Name]
		found[i].Destination, found[i].RecordsExpected = t.Destination, t.RecordsExpected
	}
	if len(destination.BootstrapServers) == 0 {
		return append(rows, preflight.Result{Cluster: "destination", Check: "connect", Status: preflight.Warn,
			Detail: "this server has no destination cluster to check", Grant: "run the check on a server with --destination-bootstrap"})
	}
	rows = append(rows, preflight.Credentials(ctx, "destination", destination.BootstrapServers, destination.Security)...)
	dst, err := destination.NewClient(append(kafkaconn.ProbeOpts(checkTimeout), kgo.WithHooks(kafkaconn.NewBrokerWatch(nil)))...)
	if err != nil {
		return append(rows, preflight.Result{Cluster: "destination", Check: "connect", Status: preflight.Fail, Detail: err.Error(),
			Grant: "check the server's destination settings"})
	}
	defer dst.Close()
	return append(rows, preflight.Destination(ctx, dst, destination.Security.Authenticated(), found, groups, int16(rf))...)
}

// replicationFactorOf checks a requested replication factor (nil: the
// destination's default).
func replicationFactorOf(in *int) (int, error) {
	if in == nil {
		return DefaultReplicationFactor, nil
	}
	if rf := *in; rf != DefaultReplicationFactor && (rf < 1 || rf > 32767) {
		return 0, &ValidationError{Fields: []FieldError{{Field: "replication_factor",
			Message: fmt.Sprintf("%d is out of range [1, 32767] (or -1: the destination's default)", rf)}}}
	}
	return *in, nil
}

// PreflightError refuses a topics:add whose clusters fail the checks that
// matter for it (CheckMirror's fail rows); nothing was changed.
type PreflightError struct {
	Mirror string
	Checks []MirrorCheck
}

func (e *PreflightError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "mirror %s: %d check(s) failed, so nothing was added (skip_checks adds anyway):", e.Mirror, len(e.Checks))
	for _, c := range e.Checks {
		fmt.Fprintf(&b, " %s %s: %s", c.Cluster, c.Check, c.Detail)
		if c.Grant != "" {
			fmt.Fprintf(&b, " (grant %s)", c.Grant)
		}
		b.WriteString(";")
	}
	return strings.TrimSuffix(b.String(), ";")
}

// preflightAdd runs the checks for topics about to be added to m, whose
// topics are existing, and returns a *PreflightError with the failed rows,
// if any; nothing without a Preflight. keep says the add keeps or replaces
// the records a destination topic holds (continue, recreate).
func (s *Control) preflightAdd(ctx context.Context, conn kafkaconn.Config, m repo.Mirror, topics []string,
	existing map[string]repo.Topic, rf int, keep bool) error {
	if s.preflight == nil {
		return nil
	}
	var failed []MirrorCheck
	for _, r := range s.preflight.Check(ctx, conn, s.destination, preflightTopics(m.Config, topics, existing, keep), rf) {
		if r.Status == preflight.Fail {
			failed = append(failed, MirrorCheck{Cluster: r.Cluster, Check: r.Check, Status: string(r.Status),
				Detail: r.Detail, Grant: r.Grant})
		}
	}
	if len(failed) > 0 {
		return &PreflightError{Mirror: m.Name, Checks: failed}
	}
	return nil
}
