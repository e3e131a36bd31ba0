package preflight

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"kmirror/internal/kafka/kafkaconn"
)

// Destination checks what a mirror needs of the destination for topics
// (as Source found them) and the source's groups, creating missing topics
// with replicationFactor (-1: the brokers' default).
func Destination(ctx context.Context, cl *kgo.Client, authenticated bool, topics []Topic, groups []string, replicationFactor int16) []Result {
	const c = "destination"
	ops, err := clusterOps(ctx, cl)
	if err != nil {
		return []Result{{Cluster: c, Check: "connect", Status: Fail,
			Detail: fmt.Sprintf("describing the cluster failed: %v", said(cl, err)),
			Grant:  "check the server's destination settings (--destination-*), and DESCRIBE on CLUSTER"}}
	}
	out := []Result{pass(c, "connect", "the cluster answers")}

	switch answers, enforces, err := enforcement(ctx, cl, authenticated); {
	case err != nil:
		out = append(out, Result{Cluster: c, Check: "authorizer", Status: Warn,
			Detail: fmt.Sprintf("could not tell whether the cluster has an authorizer: %v", said(cl, err))})
	case enforces:
		out = append(out, pass(c, "authorizer", "present: mirrored topics are kept read-only for other principals"))
		if ok, known := allows(ops, kmsg.ACLOperationAlter); known && !ok {
			out = append(out, Result{Cluster: c, Check: "create and delete ACLs", Status: Fail,
				Detail: "not allowed: the ACLs that keep mirrored topics read-only cannot be written, so partitions fail before mirroring",
				Grant:  "ALTER on CLUSTER"})
		} else {
			out = append(out, pass(c, "create and delete ACLs", "allowed"))
		}
		out = append(out, internalTopics(ctx, cl))
	case answers:
		out = append(out, Result{Cluster: c, Check: "authorizer", Status: Warn,
			Detail: "none that can tell kmirror from other clients: the cluster answers ACL requests, but its brokers name no " +
				"authorizer (authorizer.class.name empty, or not reported while kmirror connects unauthenticated), " +
				"so mirrored topics cannot be made read-only, and any client may write to them",
			Grant: "configure an authorizer on the destination, and give kmirror a SASL or TLS client identity (a super user)"})
	default:
		out = append(out, Result{Cluster: c, Check: "authorizer", Status: Warn,
			Detail: "none: mirrored topics cannot be made read-only, and any client may write to them",
			Grant:  "configure an authorizer on the destination to keep mirrored topics read-only"})
	}

	out = append(out, idempotentWrite(ctx, cl))
	if len(topics) > 0 {
		out = append(out, destinationTopics(ctx, cl, topics, replicationFactor)...)
	}
	out = append(out, destinationGroups(ctx, cl, groups))
	out = append(out, replication(ctx, cl, replicationFactor))
	return out
}

// internalTopics says whether principals other than super users (kmirror's,
// as the read-only ACLs need) are denied writing kmirror's own topics: one
// that can write __mirror_heartbeats can stop the ride-through of a
// database outage, one that can write __mirror_state can mislead a failback.
func internalTopics(ctx context.Context, cl *kgo.Client) Result {
	const c, check = "destination", "kmirror's own topics"
	own := []string{kafkaconn.InternalTopicPrefix + "state", kafkaconn.InternalTopicPrefix + "heartbeats"}
	// Every topic DENY of User:*, matched here: a MATCH filter names the
	// prefixed ACLs that cover a topic on Kafka, but not on every broker.
	res, err := kadm.NewClient(cl).DescribeACLs(ctx, kadm.NewACLs().Topics().
		ResourcePatternType(kadm.ACLPatternAny).Deny("User:*").DenyHosts().Operations(kadm.OpAny))
	denied := map[string]bool{}
	for _, r := range res {
		err = errors.Join(err, r.Err)
		for _, d := range r.Described {
			if d.Permission == kmsg.ACLPermissionTypeDeny && d.Principal == "User:*" && d.Host == "*" &&
				(d.Operation == kmsg.ACLOperationWrite || d.Operation == kmsg.ACLOperationAll) {
				for _, topic := range own {
					if d.Name == topic || d.Pattern == kmsg.ACLResourcePatternTypePrefixed && strings.HasPrefix(topic, d.Name) ||
						d.Name == "*" {
						denied[topic] = true
					}
				}
			}
		}
	}
	grant := "make kmirror's principal a super user, and deny everyone else: " + kafkaconn.InternalTopicsACLCommand +
		" (kmirror adds it itself with the first mirrored topic's read-only ACL)"
	switch {
	case err != nil:
		return Result{Cluster: c, Check: check, Status: Warn,
			Detail: fmt.Sprintf("could not read the ACLs of %s: %v", names(slices.Clone(own)), err), Grant: grant}
	case len(denied) < len(own):
		var open []string
		for _, topic := range own {
			if !denied[topic] {
				open = append(open, topic)
			}
		}
		return Result{Cluster: c, Check: check, Status: Warn,
			Detail: fmt.Sprintf("principals other than super users may write %s if granted WRITE: one that writes %s "+
				"can stop kmirror riding through a database outage", names(open), kafkaconn.InternalTopicPrefix+"heartbeats"), Grant: grant}
	}
	return pass(c, check, fmt.Sprintf("only super users may write %s", names(slices.Clone(own))))
}

// idempotentWrite asks for an idempotent producer id, as kmirror's
// producer does first.
func idempotentWrite(ctx context.Context, cl *kgo.Client) Result {
	const c, check = "destination", "idempotent write"
	req := kmsg.NewPtrInitProducerIDRequest()
	req.TransactionTimeoutMillis = -1
	resp, err := req.RequestWith(ctx, cl)
	if err == nil {
		err = kerr.ErrorForCode(resp.ErrorCode)
	}
	switch {
	case err == nil:
		return pass(c, check, "a producer id was granted")
	case errors.Is(err, kerr.ClusterAuthorizationFailed), errors.Is(err, kerr.TransactionalIDAuthorizationFailed):
		return Result{Cluster: c, Check: check, Status: Fail, Detail: fmt.Sprintf("refused: %v", said(cl, err)),
			Grant: "IDEMPOTENT_WRITE on CLUSTER (or WRITE on the mirrored topics, from Kafka 2.8)"}
	}
	return Result{Cluster: c, Check: check, Status: Fail, Detail: fmt.Sprintf("failed: %v", said(cl, err))}
}

// destinationTopics checks creating, writing and configuring the topics
// (by their destination names), that an existing one holds no records
// that would fail its partitions, and their message size limits against
// the source's.
func destinationTopics(ctx context.Context, cl *kgo.Client, topics []Topic, replicationFactor int16) []Result {
	const c = "destination"
	nameList := make([]string, len(topics))
	for i, t := range topics {
		nameList[i] = t.DestinationName()
	}
	states, err := topicStates(ctx, cl, nameList)
	if err != nil {
		return []Result{{Cluster: c, Check: "describe topics", Status: Fail, Detail: fmt.Sprintf("metadata failed: %v", said(cl, err)),
			Grant: "DESCRIBE on the topics"}}
	}
	var toCreate []Topic
	var existing, unexpected, unwritable, unknownWrite, noAlter []string
	for _, t := range topics {
		name := t.DestinationName()
		st := states[name]
		if st.err != nil {
			toCreate = append(toCreate, t) // missing, or hidden: the create says which
		} else {
			existing = append(existing, name)
			if !t.RecordsExpected {
				unexpected = append(unexpected, name)
			}
		}
		switch ok, known := allows(st.ops, kmsg.ACLOperationWrite); {
		case !known && st.err != nil:
			unknownWrite = append(unknownWrite, name)
		case known && !ok:
			unwritable = append(unwritable, name)
		}
		if ok, known := allows(st.ops, kmsg.ACLOperationAlterConfigs); known && !ok {
			noAlter = append(noAlter, name)
		}
	}
	out := []Result{createTopics(ctx, cl, toCreate, replicationFactor), existingRecords(ctx, cl, unexpected)}
	write := permRow(c, "write topics", Fail, unwritable, len(topics), "WRITE on topic")
	if write.Status == Pass && len(unknownWrite) > 0 {
		write = Result{Cluster: c, Check: "write topics", Status: Warn,
			Detail: fmt.Sprintf("the brokers do not say before %s exist(s); kmirror will need it then", names(unknownWrite)),
			Grant:  "WRITE on topic " + names(unknownWrite)}
	}
	out = append(out, write)
	out = append(out, permRow(c, "alter topic configs", Warn, noAlter, len(topics), "ALTER_CONFIGS on topic",
		"topic configs are not synced"))
	return append(out, messageSizes(ctx, cl, topics, existing))
}

// createTopics asks to create the missing topics without creating them
// (validate_only).
func createTopics(ctx context.Context, cl *kgo.Client, topics []Topic, replicationFactor int16) Result {
	const c, check = "destination", "create topics"
	if len(topics) == 0 {
		return pass(c, check, "every topic exists already")
	}
	req := kmsg.NewPtrCreateTopicsRequest()
	req.ValidateOnly = true
	req.TimeoutMillis = 10_000
	for _, t := range topics {
		rt := kmsg.NewCreateTopicsRequestTopic()
		rt.Topic, rt.NumPartitions, rt.ReplicationFactor = t.DestinationName(), t.Partitions, replicationFactor
		req.Topics = append(req.Topics, rt)
	}
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return Result{Cluster: c, Check: check, Status: Fail, Detail: fmt.Sprintf("failed: %v", said(cl, err))}
	}
	var denied, other []string
	for _, t := range resp.Topics {
		switch err := kerr.ErrorForCode(t.ErrorCode); {
		case err == nil, errors.Is(err, kerr.TopicAlreadyExists):
		case errors.Is(err, kerr.TopicAuthorizationFailed), errors.Is(err, kerr.ClusterAuthorizationFailed):
			denied = append(denied, t.Topic)
		default:
			msg := err.Error()
			if t.ErrorMessage != nil {
				msg = *t.ErrorMessage
			}
			other = append(other, fmt.Sprintf("%s: %s", t.Topic, msg))
		}
	}
	switch {
	case len(denied) > 0:
		return Result{Cluster: c, Check: check, Status: Fail, Detail: fmt.Sprintf("not allowed to create %s", names(denied)),
			Grant: "CREATE on CLUSTER, or on topic " + names(denied)}
	case len(other) > 0:
		return Result{Cluster: c, Check: check, Status: Fail, Detail: fmt.Sprintf("would fail: %s", names(other)),
			Grant: "fix what the brokers refuse, e.g. the replication factor (topics:add replication_factor)"}
	}
	return pass(c, check, fmt.Sprintf("%d topic(s) to create: allowed", len(topics)))
}

// existingRecords checks that the existing destination topics whose
// records are not expected hold none: a partition that starts mirroring
// into one fails, as kmirror never mixes its copies with records it did
// not write. An empty one is taken as it is (topics created ahead with
// their own configs).
func existingRecords(ctx context.Context, cl *kgo.Client, topics []string) Result {
	const c, check = "destination", "existing records"
	if len(topics) == 0 {
		return pass(c, check, "no existing topic to be written holds records this mirror did not write")
	}
	adm := kadm.NewClient(cl)
	starts, err := adm.ListStartOffsets(ctx, topics...)
	if err == nil {
		err = starts.Error()
	}
	var ends kadm.ListedOffsets
	if err == nil {
		ends, err = adm.ListEndOffsets(ctx, topics...)
	}
	if err == nil {
		err = ends.Error()
	}
	if err != nil {
		return Result{Cluster: c, Check: check, Status: Warn,
			Detail: fmt.Sprintf("cannot list the offsets of %s: %v; a partition fails if its topic holds records", names(topics), said(cl, err)),
			Grant:  "DESCRIBE on topic " + names(topics)}
	}
	held := map[string]bool{}
	ends.Each(func(o kadm.ListedOffset) {
		if s, ok := starts.Lookup(o.Topic, o.Partition); ok && o.Offset > s.Offset {
			held[o.Topic] = true
		}
	})
	if len(held) == 0 {
		return pass(c, check, fmt.Sprintf("the %d existing topic(s) to be written are empty", len(topics)))
	}
	full := slices.Sorted(maps.Keys(held))
	verb := "hold"
	if len(full) == 1 {
		verb = "holds"
	}
	return Result{Cluster: c, Check: check, Status: Fail,
		Detail: fmt.Sprintf("%s already %s records that this mirror did not write: its partitions would go FAILED", names(full), verb),
		Grant: "add with recreate to replace the topic, or with continue if the source was mirrored from this destination " +
			"(a failback); or mirror it under another name (topic.name.prefix, on a mirror without topics)"}
}

// messageSizes compares the existing destination topics' max.message.bytes
// with the source topics': a batch larger than the destination takes fails
// to copy.
func messageSizes(ctx context.Context, cl *kgo.Client, topics []Topic, existing []string) Result {
	const c, check = "destination", "message size limits"
	if len(existing) == 0 {
		return pass(c, check, "topics are created with the source's configs")
	}
	rcs, err := kadm.NewClient(cl).DescribeTopicConfigs(ctx, existing...)
	if err != nil {
		return Result{Cluster: c, Check: check, Status: Warn, Detail: fmt.Sprintf("cannot read the topics' configs: %v", said(cl, err)),
			Grant: "DESCRIBE_CONFIGS on the topics"}
	}
	limits := map[string]int64{}
	for _, rc := range rcs {
		for _, cfg := range rc.Configs {
			if cfg.Key == "max.message.bytes" && cfg.Value != nil {
				limits[rc.Name], _ = strconv.ParseInt(*cfg.Value, 10, 64)
			}
		}
	}
	var small []string
	for _, t := range topics {
		name := t.DestinationName()
		if d, ok := limits[name]; ok && d > 0 && t.MaxMessageBytes > d {
			small = append(small, fmt.Sprintf("%s (%d < %d)", name, d, t.MaxMessageBytes))
		}
	}
	if len(small) > 0 {
		return Result{Cluster: c, Check: check, Status: Fail,
			Detail: fmt.Sprintf("max.message.bytes below the source's: %s", names(small)),
			Grant:  "raise max.message.bytes on those destination topics to the source's"}
	}
	return pass(c, check, "no destination topic takes less than its source")
}

// destinationGroups checks that the source's groups' offsets can be
// written on the destination (OffsetCommit needs READ on the group).
func destinationGroups(ctx context.Context, cl *kgo.Client, groups []string) Result {
	const c, check = "destination", "write group offsets"
	if len(groups) == 0 {
		return pass(c, check, "no source groups to sync")
	}
	sample := groups[:min(len(groups), groupSample)]
	ops, err := groupOps(ctx, cl, sample)
	switch {
	case errors.Is(err, kerr.GroupAuthorizationFailed):
		// Finding the groups' coordinator needs DESCRIBE on them, which
		// READ implies: without it nothing is allowed.
		return permRow(c, check, Warn, sample, len(sample), "READ on group", "those groups' offsets are not synced")
	case err != nil:
		return Result{Cluster: c, Check: check, Status: Warn, Detail: fmt.Sprintf("describing groups failed: %v", said(cl, err)),
			Grant: "READ on the groups to sync"}
	}
	var denied []string
	for _, g := range sample {
		if ok, known := allows(ops[g], kmsg.ACLOperationRead); known && !ok {
			denied = append(denied, g)
		}
	}
	return permRow(c, check, Warn, denied, len(sample), "READ on group", "those groups' offsets are not synced")
}

// replication checks that the replication factor topics are created with
// is at least min.insync.replicas: below it every write fails with
// NOT_ENOUGH_REPLICAS.
func replication(ctx context.Context, cl *kgo.Client, replicationFactor int16) Result {
	const c, check = "destination", "replication factor and min.insync.replicas"
	rcs, err := kadm.NewClient(cl).DescribeBrokerConfigs(ctx)
	if err != nil || len(rcs) == 0 || rcs[0].Err != nil {
		return Result{Cluster: c, Check: check, Status: Warn, Detail: fmt.Sprintf("cannot read the brokers' configs: %v", said(cl, cmpErr(err, rcs))),
			Grant: "DESCRIBE_CONFIGS on CLUSTER"}
	}
	get := func(key string) int64 {
		for _, cfg := range rcs[0].Configs {
			if cfg.Key == key && cfg.Value != nil {
				v, _ := strconv.ParseInt(*cfg.Value, 10, 64)
				return v
			}
		}
		return 0
	}
	rf := int64(replicationFactor)
	if rf <= 0 {
		rf = get("default.replication.factor")
	}
	minISR := get("min.insync.replicas")
	if rf > 0 && minISR > rf {
		return Result{Cluster: c, Check: check, Status: Fail,
			Detail: fmt.Sprintf("topics would be created with %d replica(s), below min.insync.replicas %d: every write would fail", rf, minISR),
			Grant:  "add the topics with a replication_factor of at least min.insync.replicas"}
	}
	return pass(c, check, fmt.Sprintf("replication factor %d, min.insync.replicas %d", rf, minISR))
}

func cmpErr(err error, rcs kadm.ResourceConfigs) error {
	if err != nil {
		return err
	}
	if len(rcs) > 0 {
		return rcs[0].Err
	}
	return errors.New("no broker answered")
}

// enforcement says whether the cluster answers ACL requests at all, and
// whether it would enforce kmirror's read-only ACL on the evidence the
// data plane's read_only_enforced rests on (kafkaconn.EnforcesACLs), so
// that the two never disagree.
func enforcement(ctx context.Context, cl *kgo.Client, authenticated bool) (answers, enforces bool, err error) {
	present, err := authorizer(ctx, cl)
	switch {
	case err != nil && !present:
		return false, false, err
	case !present:
		return false, false, nil
	case err != nil:
		return true, true, nil // an authorizer refused kmirror the describe itself
	}
	enforces, err = kafkaconn.EnforcesACLs(ctx, kadm.NewClient(cl), authenticated)
	return true, enforces, err
}
