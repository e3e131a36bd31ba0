package kafkaconn

import (
	"context"
	"errors"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
)

// EnforcesACLs says whether a cluster would enforce a DENY ACL against
// other clients than the one asking, as kmirror's read-only ACL needs. A
// broker may answer the ACL requests without an authorizer behind them, so
// the evidence is, in order: the brokers' authorizer.class.name (Apache
// Kafka reports it, empty when none is configured); when it is not
// reported, whether the client authenticates at all (authenticated, from
// Security.Authenticated): a broker that lets everyone in as ANONYMOUS
// cannot tell kmirror from anyone else. A CreateACLs or DescribeACLs
// answering SECURITY_DISABLED is stronger evidence still, and the callers
// check it first; a refusal to read the brokers' configs (no DESCRIBE_CONFIGS
// on the cluster) proves an authorizer too.
func EnforcesACLs(ctx context.Context, adm *kadm.Client, authenticated bool) (bool, error) {
	// A named broker: the unnamed resource holds only the dynamic defaults,
	// and authorizer.class.name is a static setting.
	brokers, err := adm.ListBrokers(ctx)
	if err != nil {
		return false, err
	}
	if len(brokers) == 0 {
		return false, nil
	}
	cfgs, err := adm.DescribeBrokerConfigs(ctx, brokers[0].NodeID)
	for _, rc := range cfgs {
		if err == nil {
			err = rc.Err
		}
	}
	if errors.Is(err, kerr.ClusterAuthorizationFailed) {
		return true, nil // an authorizer refused the read itself
	}
	if err != nil {
		return false, err
	}
	for _, rc := range cfgs {
		for _, c := range rc.Configs {
			if c.Key == "authorizer.class.name" {
				return c.MaybeValue() != "", nil
			}
		}
	}
	return authenticated, nil
}
