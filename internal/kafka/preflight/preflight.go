// Package preflight checks, against real clusters and with kmirror's own
// credentials, what a mirror will need of its source and its destination,
// before it needs it: one row per check, pass, warn or fail, each naming
// what to grant. A fail stops the copy itself; a warn stops a feature
// beside it (config, group offset or ACL sync, read-only enforcement).
//
// Permissions are read from the brokers' answers about what the principal
// may do (KIP-430's authorized operations), or found by asking for the
// thing itself without doing it (CreateTopics with validate_only, an
// idempotent producer id): nothing on either cluster is changed.
//
// A mirror that names a source Schema Registry gets rows for it and for
// the deployment's destination registry (registry.go): whether the schema
// sync may read the one and write the other in IMPORT mode. A fail there
// stops the schema copy, not the records'. IMPORT is asked for by setting
// it on a probe subject that holds nothing, whose mode is then deleted: the
// one change a check makes, undone before it answers.
package preflight

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"kmirror/internal/kafka/kafkaconn"
)

// Status is a check's outcome.
type Status string

// The statuses, from best to worst.
const (
	Pass Status = "pass"
	Warn Status = "warn"
	Fail Status = "fail"
)

// Result is one check.
type Result struct {
	// Cluster is "source", "destination", "source registry" or
	// "destination registry".
	Cluster string
	// Check says what was checked, e.g. "read topics".
	Check  string
	Status Status
	// Detail is what was found; Grant, when not Pass, what to grant or
	// change.
	Detail string
	Grant  string
}

// Topic is a topic to check, as the source has it.
type Topic struct {
	Name       string
	Partitions int32
	// MaxMessageBytes is the source topic's max.message.bytes, 0 unknown.
	MaxMessageBytes int64
	// Destination is the topic it is written to on the destination ("":
	// Name); the caller sets it between Source and Destination.
	Destination string
	// RecordsExpected says records already in the destination topic are
	// expected: this mirror wrote them, or the add keeps or drops them
	// (continue, recreate). Otherwise a destination topic that holds
	// records fails the check, as its partitions would fail to start.
	RecordsExpected bool
}

// DestinationName is the topic's name on the destination.
func (t Topic) DestinationName() string { return cmp.Or(t.Destination, t.Name) }

// opsUnknown is the authorized operations a broker answers when it does not
// say (a topic that does not exist, an old broker).
const opsUnknown = math.MinInt32

// allows says whether an authorized-operations bitfield has op; known is
// false when the broker did not say.
func allows(ops int32, op kmsg.ACLOperation) (ok, known bool) {
	if ops == opsUnknown {
		return false, false
	}
	return ops&(1<<int32(op)) != 0, true
}

// names lists up to five names and how many more there are.
func names(ns []string) string {
	slices.Sort(ns)
	if len(ns) <= 5 {
		return strings.Join(ns, ", ")
	}
	return fmt.Sprintf("%s and %d more", strings.Join(ns[:5], ", "), len(ns)-5)
}

func pass(cluster, check, detail string) Result {
	return Result{Cluster: cluster, Check: check, Status: Pass, Detail: detail}
}

// Worst is the worst status among results (Pass when there are none).
func Worst(results []Result) Status {
	worst := Pass
	for _, r := range results {
		if r.Status == Fail || r.Status == Warn && worst == Pass {
			worst = r.Status
		}
	}
	return worst
}

// said is how a row shows a request's error: a broker that could not be
// spoken to reads the same whatever answered at its address
// (kafkaconn.Public: the brokers a source advertises are its to choose,
// and rows that told a closed port from a database would scan them for
// whoever sets them). The client's hooks log the detail.
func said(cl *kgo.Client, err error) error {
	seeds, _ := cl.OptValue(kgo.SeedBrokers).([]string)
	return kafkaconn.Public(err, seeds)
}
