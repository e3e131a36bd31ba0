package metadatasync

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"kmirror/repo"
	"kmirror/service"
)

const (
	topicACL = kmsg.ACLResourceTypeTopic
	groupACL = kmsg.ACLResourceTypeGroup
	literal  = kmsg.ACLResourcePatternTypeLiteral
	prefixed = kmsg.ACLResourcePatternTypePrefixed
)

func readACL(rt kmsg.ACLResourceType, name string, pt kmsg.ACLResourcePatternType) aclEntry {
	return aclEntry{resourceType: rt, name: name, pattern: pt, principal: "User:alice", host: "*",
		operation: kmsg.ACLOperationRead, permission: kmsg.ACLPermissionTypeAllow}
}

// TestACLToDestination: topic and group ACLs take the mirror's name
// prefixes, LITERAL and PREFIXED alike; a LITERAL * stays *; without
// prefixes nothing is renamed.
func TestACLToDestination(t *testing.T) {
	t.Parallel()
	prefixedPass := &syncPass{
		mirror: repo.Mirror{Config: map[string]string{service.CfgTopicNamePrefix: "east.", service.CfgGroupNamePrefix: "e-"}},
		topics: map[string]repo.Topic{"orders": {Topic: "orders", DestTopic: "east.orders"}},
	}
	plainPass := &syncPass{topics: map[string]repo.Topic{"orders": {Topic: "orders", DestTopic: "orders"}}}
	for _, tc := range []struct {
		name        string
		acl         aclEntry
		want, plain string
	}{
		{"literal topic", readACL(topicACL, "orders", literal), "east.orders", "orders"},
		{"prefixed topic", readACL(topicACL, "ord", prefixed), "east.ord", "ord"},
		{"literal * topic", readACL(topicACL, "*", literal), "*", "*"},
		{"literal group", readACL(groupACL, "billing", literal), "e-billing", "billing"},
		{"prefixed group", readACL(groupACL, "app-", prefixed), "e-app-", "app-"},
		{"literal * group", readACL(groupACL, "*", literal), "*", "*"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := prefixedPass.toDestination(tc.acl)
			want := tc.acl
			want.name = tc.want
			if got != want {
				t.Fatalf("with prefixes: %s, want %s", got, want)
			}
			if got, want.name = plainPass.toDestination(tc.acl), tc.plain; got != want {
				t.Fatalf("without prefixes: %s, want %s", got, want)
			}
		})
	}
}

// TestCopiesACLSkipsTopicsWrittenElsewhere: a stopped topic whose
// destination topic another mirror writes now gives its ACLs to nobody
// here, LITERAL or as the only topic a PREFIXED one covers; a LITERAL * on
// topics is never copied.
func TestCopiesACLSkipsTopicsWrittenElsewhere(t *testing.T) {
	t.Parallel()
	cfg, err := service.ParseSyncConfig(nil)
	if err != nil {
		t.Fatal(err)
	}
	p := &syncPass{cfg: cfg,
		topics: map[string]repo.Topic{
			"orders":   {Topic: "orders", DestTopic: "orders", DesiredState: service.DesiredStopped},
			"payments": {Topic: "payments", DestTopic: "payments", DesiredState: service.DesiredMirroring},
		},
		elsewhere: map[string]repo.Writer{"orders": {Mirror: "other", Topic: "orders"}},
	}
	for _, tc := range []struct {
		acl  aclEntry
		want bool
	}{
		{readACL(topicACL, "orders", literal), false},
		{readACL(topicACL, "or", prefixed), false},
		{readACL(topicACL, "payments", literal), true},
		{readACL(topicACL, "pay", prefixed), true},
		{readACL(topicACL, "*", literal), false},
		{readACL(groupACL, "*", literal), true},
	} {
		if got := p.copiesACL(tc.acl); got != tc.want {
			t.Errorf("copiesACL(%s) = %v, want %v", tc.acl, got, tc.want)
		}
	}
	delete(p.elsewhere, "orders")
	if !p.copiesACL(readACL(topicACL, "orders", literal)) || !p.copiesACL(readACL(topicACL, "or", prefixed)) {
		t.Fatal("a stopped topic nobody else writes lost its ACLs")
	}
}
