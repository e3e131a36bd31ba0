package partition

import (
	"context"
	"sync"

	"github.com/twmb/franz-go/pkg/kadm"
)

// authorizerProbe answers whether the destination enforces ACLs, so that
// read-only is reported as enforced only where it is. A broker without an
// authorizer may accept CreateACLs and still let anyone write.
//
// The evidence, strongest first:
//   - CreateACLs failing with SECURITY_DISABLED (checked by the caller);
//   - the brokers' authorizer.class.name (Apache Kafka reports it, empty
//     when no authorizer is configured);
//   - when the broker does not report it: whether kmirror authenticates to
//     the destination at all. A broker that lets every client in as
//     ANONYMOUS cannot tell kmirror from anyone else, so a DENY for User:*
//     would either stop kmirror too or not be checked.
type authorizerProbe struct {
	admin         *kadm.Client
	authenticated bool

	mu    sync.Mutex
	known bool
	has   bool
}

// enforces returns whether the destination has an authorizer. A failed
// probe is not cached, and reports false: unproven is not enforced.
func (p *authorizerProbe) enforces(ctx context.Context) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.known {
		return p.has
	}
	// A named broker: the unnamed resource holds only the dynamic defaults,
	// and authorizer.class.name is a static setting.
	brokers, err := p.admin.ListBrokers(ctx)
	if err != nil || len(brokers) == 0 {
		return false
	}
	cfgs, err := p.admin.DescribeBrokerConfigs(ctx, brokers[0].NodeID)
	if err != nil {
		return false
	}
	reported := false
	for _, rc := range cfgs {
		if rc.Err != nil {
			return false
		}
		for _, c := range rc.Configs {
			if c.Key == "authorizer.class.name" {
				reported = true
				p.has = c.MaybeValue() != ""
			}
		}
	}
	if !reported {
		p.has = p.authenticated
	}
	p.known = true
	return p.has
}
