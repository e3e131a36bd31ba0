package partition

import (
	"context"
	"sync"

	"github.com/twmb/franz-go/pkg/kadm"

	"kmirror/internal/kafka/kafkaconn"
)

// authorizerProbe answers whether the destination enforces ACLs, so that
// read-only is reported as enforced only where it is. A broker without an
// authorizer may accept CreateACLs and still let anyone write.
//
// CreateACLs failing with SECURITY_DISABLED is checked by the caller; the
// rest of the evidence is kafkaconn.EnforcesACLs', which the preflight's
// authorizer row uses too, so the two never disagree.
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
	has, err := kafkaconn.EnforcesACLs(ctx, p.admin, p.authenticated)
	if err != nil {
		return false
	}
	p.has = has
	p.known = true
	return p.has
}
