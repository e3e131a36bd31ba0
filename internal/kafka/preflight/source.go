package preflight

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// groupSample bounds how many groups have their offsets read or their
// permissions asked: enough to find a missing grant, not a scan of a
// cluster's thousands.
const groupSample = 20

// Source checks what a mirror needs of its source for topics (none: the
// cluster-wide checks only). It returns the rows, the topics as the source
// has them (for Destination) and the groups whose offsets it may sync.
func Source(ctx context.Context, cl *kgo.Client, topics []string) ([]Result, []Topic, []string) {
	const c = "source"
	ops, err := clusterOps(ctx, cl)
	if err != nil {
		return []Result{{Cluster: c, Check: "connect", Status: Fail,
			Detail: fmt.Sprintf("describing the cluster failed: %v", said(cl, err)),
			Grant:  "check the bootstrap servers, TLS and SASL settings, and DESCRIBE on CLUSTER"}}, nil, nil
	}
	out := []Result{pass(c, "connect", "the cluster answers")}

	var found []Topic
	switch {
	case len(topics) == 0:
		out = append(out, Result{Cluster: c, Check: "describe and read topics", Status: Warn,
			Detail: "no topics to check: the mirror has none yet, and none was named",
			Grant:  "name the topics (topic) to check them"})
	default:
		states, err := topicStates(ctx, cl, topics)
		if err != nil {
			out = append(out, Result{Cluster: c, Check: "describe topics", Status: Fail,
				Detail: fmt.Sprintf("metadata failed: %v", said(cl, err)), Grant: "DESCRIBE on the topics"})
			break
		}
		var hidden, missing, unreadable, noConfigs []string
		for _, t := range topics {
			st, ok := states[t]
			switch {
			case !ok, errors.Is(st.err, kerr.UnknownTopicOrPartition):
				missing = append(missing, t)
				continue
			case errors.Is(st.err, kerr.TopicAuthorizationFailed):
				hidden = append(hidden, t)
				continue
			}
			if ok, known := allows(st.ops, kmsg.ACLOperationRead); known && !ok {
				unreadable = append(unreadable, t)
			}
			if ok, known := allows(st.ops, kmsg.ACLOperationDescribeConfigs); known && !ok {
				noConfigs = append(noConfigs, t)
			}
			found = append(found, Topic{Name: t, Partitions: st.partitions})
		}
		out = append(out, topicRow(c, "describe topics", Fail, hidden, missing, "DESCRIBE on topic"))
		out = append(out, permRow(c, "read topics", Fail, unreadable, len(found), "READ on topic"))
		out = append(out, permRow(c, "describe topic configs", Warn, noConfigs, len(found),
			"DESCRIBE_CONFIGS on topic", "topic configs are not synced"))
		sourceLimits(ctx, cl, found)
	}

	groups, groupRows := sourceGroups(ctx, cl, ops)
	out = append(out, groupRows...)
	switch present, err := authorizer(ctx, cl); {
	case !present && err == nil:
		out = append(out, pass(c, "describe ACLs", "no authorizer: there are no ACLs to sync"))
	case err != nil:
		out = append(out, Result{Cluster: c, Check: "describe ACLs", Status: Warn,
			Detail: fmt.Sprintf("describing ACLs failed: %v; ACLs are not synced", said(cl, err)), Grant: "DESCRIBE on CLUSTER"})
	default:
		out = append(out, pass(c, "describe ACLs", "ACLs can be read"))
	}
	return out, found, groups
}

// sourceGroups checks that groups can be listed and their offsets read.
func sourceGroups(ctx context.Context, cl *kgo.Client, ops int32) ([]string, []Result) {
	const c = "source"
	groups, err := listGroups(ctx, cl)
	if err != nil {
		return nil, []Result{{Cluster: c, Check: "list groups", Status: Warn,
			Detail: fmt.Sprintf("listing groups failed: %v; group offsets are not synced", said(cl, err)),
			Grant:  "DESCRIBE on CLUSTER, or on the groups to sync"}}
	}
	var out []Result
	if ok, known := allows(ops, kmsg.ACLOperationDescribe); known && !ok {
		out = append(out, Result{Cluster: c, Check: "list groups", Status: Warn,
			Detail: fmt.Sprintf("%d group(s) listed: only those the principal may describe", len(groups)),
			Grant:  "DESCRIBE on CLUSTER, or on each group to sync"})
	} else {
		out = append(out, pass(c, "list groups", fmt.Sprintf("%d group(s) listed", len(groups))))
	}
	if len(groups) == 0 {
		return nil, append(out, pass(c, "read group offsets", "no groups to read"))
	}
	sample := groups[:min(len(groups), groupSample)]
	fetched := kadm.NewClient(cl).FetchManyOffsets(ctx, sample...)
	var denied []string
	fetched.EachError(func(r kadm.FetchOffsetsResponse) { denied = append(denied, r.Group) })
	return groups, append(out, permRow(c, "read group offsets", Warn, denied, len(sample),
		"DESCRIBE on group", "those groups' offsets are not synced"))
}

// sourceLimits fills in the topics' max.message.bytes where the principal
// may read them.
func sourceLimits(ctx context.Context, cl *kgo.Client, topics []Topic) {
	if len(topics) == 0 {
		return
	}
	nameList := make([]string, len(topics))
	for i, t := range topics {
		nameList[i] = t.Name
	}
	rcs, err := kadm.NewClient(cl).DescribeTopicConfigs(ctx, nameList...)
	if err != nil {
		return
	}
	limits := map[string]int64{}
	for _, rc := range rcs {
		for _, cfg := range rc.Configs {
			if cfg.Key == "max.message.bytes" && cfg.Value != nil {
				limits[rc.Name], _ = strconv.ParseInt(*cfg.Value, 10, 64)
			}
		}
	}
	for i := range topics {
		topics[i].MaxMessageBytes = limits[topics[i].Name]
	}
}

// topicRow is a row about topics that could not be described or do not
// exist.
func topicRow(cluster, check string, bad Status, hidden, missing []string, grant string) Result {
	switch {
	case len(hidden) > 0:
		return Result{Cluster: cluster, Check: check, Status: bad,
			Detail: fmt.Sprintf("not allowed to describe %s", names(hidden)), Grant: grant + " " + names(hidden)}
	case len(missing) > 0:
		return Result{Cluster: cluster, Check: check, Status: bad,
			Detail: fmt.Sprintf("no such topic: %s", names(missing)), Grant: "check the topic names"}
	}
	return pass(cluster, check, "every topic can be described")
}

// permRow is a row about a permission some of n resources lack; why says
// what follows for a Warn.
func permRow(cluster, check string, bad Status, lacking []string, n int, grant string, why ...string) Result {
	if len(lacking) == 0 {
		return pass(cluster, check, fmt.Sprintf("allowed on all %d", n))
	}
	detail := fmt.Sprintf("not allowed on %s", names(lacking))
	for _, w := range why {
		detail += "; " + w
	}
	return Result{Cluster: cluster, Check: check, Status: bad, Detail: detail, Grant: grant + " " + names(lacking)}
}
