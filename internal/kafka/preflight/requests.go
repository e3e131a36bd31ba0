package preflight

import (
	"context"
	"errors"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// clusterOps asks what the principal may do on the cluster resource.
func clusterOps(ctx context.Context, cl *kgo.Client) (int32, error) {
	req := kmsg.NewPtrDescribeClusterRequest()
	req.IncludeClusterAuthorizedOperations = true
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return 0, err
	}
	if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
		return 0, err
	}
	return resp.ClusterAuthorizedOperations, nil
}

// topicState is a topic as the metadata answered for the principal.
type topicState struct {
	err        error // nil, or why it cannot be described
	ops        int32
	partitions int32
}

// topicStates asks for the topics' metadata with what the principal may do
// on each.
func topicStates(ctx context.Context, cl *kgo.Client, topics []string) (map[string]topicState, error) {
	req := kmsg.NewPtrMetadataRequest()
	req.IncludeTopicAuthorizedOperations = true
	req.AllowAutoTopicCreation = false
	for _, t := range topics {
		rt := kmsg.NewMetadataRequestTopic()
		rt.Topic = kmsg.StringPtr(t)
		req.Topics = append(req.Topics, rt)
	}
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return nil, err
	}
	out := make(map[string]topicState, len(topics))
	for _, t := range resp.Topics {
		if t.Topic == nil {
			continue
		}
		out[*t.Topic] = topicState{err: kerr.ErrorForCode(t.ErrorCode), ops: t.AuthorizedOperations,
			partitions: int32(len(t.Partitions))}
	}
	return out, nil
}

// authorizer says whether the cluster has an authorizer: DescribeACLs
// answers SECURITY_DISABLED without one. Without DESCRIBE on the cluster
// the answer is an authorization error, which means there is one.
func authorizer(ctx context.Context, cl *kgo.Client) (present bool, err error) {
	req := kmsg.NewPtrDescribeACLsRequest()
	req.ResourceType = kmsg.ACLResourceTypeAny
	req.ResourcePatternType = kmsg.ACLResourcePatternTypeAny
	req.Operation = kmsg.ACLOperationAny
	req.PermissionType = kmsg.ACLPermissionTypeAny
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return false, err
	}
	err = kerr.ErrorForCode(resp.ErrorCode)
	switch {
	case errors.Is(err, kerr.SecurityDisabled):
		return false, nil
	case err == nil, errors.Is(err, kerr.ClusterAuthorizationFailed):
		return true, err
	}
	return false, err
}

// listGroups lists the consumer groups the principal may see.
func listGroups(ctx context.Context, cl *kgo.Client) ([]string, error) {
	req := kmsg.NewPtrListGroupsRequest()
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return nil, err
	}
	if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
		return nil, err
	}
	var out []string
	for _, g := range resp.Groups {
		out = append(out, g.Group)
	}
	return out, nil
}

// groupOps asks what the principal may do on each group (a group that does
// not exist there yet too).
func groupOps(ctx context.Context, cl *kgo.Client, groups []string) (map[string]int32, error) {
	req := kmsg.NewPtrDescribeGroupsRequest()
	req.Groups = groups
	req.IncludeAuthorizedOperations = true
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return nil, err
	}
	out := map[string]int32{}
	for _, g := range resp.Groups {
		ops := g.AuthorizedOperations
		if errors.Is(kerr.ErrorForCode(g.ErrorCode), kerr.GroupAuthorizationFailed) {
			ops = 0
		}
		out[g.Group] = ops
	}
	return out, nil
}
