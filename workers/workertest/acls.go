package workertest

import (
	"context"
	"fmt"
	"slices"
	"testing"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// InternalTopicsACLStrings are kafkaconn.InternalTopicsACL as ACLStrings
// writes them: the engine adds them with a topic's read-only ACL.
var InternalTopicsACLStrings = []string{
	"TOPIC:__mirror_:PREFIXED:User:*:*:DELETE:DENY",
	"TOPIC:__mirror_:PREFIXED:User:*:*:WRITE:DENY",
}

// ACLStrings lists every ACL of a cluster as
// TYPE:NAME:PATTERN:PRINCIPAL:HOST:OPERATION:PERMISSION, sorted.
func ACLStrings(tb testing.TB, ctx context.Context, cl *kgo.Client) []string {
	tb.Helper()
	req := kmsg.NewPtrDescribeACLsRequest()
	req.ResourceType = kmsg.ACLResourceTypeAny
	req.ResourcePatternType = kmsg.ACLResourcePatternTypeAny
	req.Operation = kmsg.ACLOperationAny
	req.PermissionType = kmsg.ACLPermissionTypeAny
	resp, err := req.RequestWith(ctx, cl)
	if err == nil {
		err = kerr.ErrorForCode(resp.ErrorCode)
	}
	if err != nil {
		tb.Fatalf("describe ACLs: %v", err)
	}
	var out []string
	for _, r := range resp.Resources {
		for _, a := range r.ACLs {
			out = append(out, fmt.Sprintf("%s:%s:%s:%s:%s:%s:%s", r.ResourceType, r.ResourceName,
				r.ResourcePatternType, a.Principal, a.Host, a.Operation, a.PermissionType))
		}
	}
	slices.Sort(out)
	return out
}

// ReadACL allows principal to read the builder's resources, named by
// pattern (LITERAL or PREFIXED), from any host.
func ReadACL(b *kadm.ACLBuilder, pattern kadm.ACLPattern, principal string) *kadm.ACLBuilder {
	return b.ResourcePatternType(pattern).Allow(principal).AllowHosts("*").Operations(kadm.OpRead)
}

// MustCreateACLs creates the ACLs b describes through adm, failing the test
// on any error.
func MustCreateACLs(tb testing.TB, ctx context.Context, adm *kadm.Client, b *kadm.ACLBuilder) {
	tb.Helper()
	res, err := adm.CreateACLs(ctx, b)
	for _, r := range res {
		if err == nil {
			err = r.Err
		}
	}
	if err != nil {
		tb.Fatalf("create ACLs: %v", err)
	}
}
