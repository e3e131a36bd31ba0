package metadatasync

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"kmirror/repo"
	"kmirror/service"
)

// aclEntry is one ACL binding: a resource pattern and an access control
// entry.
type aclEntry struct {
	resourceType kmsg.ACLResourceType
	name         string
	pattern      kmsg.ACLResourcePatternType
	principal    string
	host         string
	operation    kmsg.ACLOperation
	permission   kmsg.ACLPermissionType
}

func (a aclEntry) String() string {
	return fmt.Sprintf("%s:%s:%s:%s:%s:%s:%s", a.resourceType, a.name, a.pattern, a.principal, a.host, a.operation, a.permission)
}

func (a aclEntry) row() repo.SyncedACL {
	return repo.SyncedACL{ResourceType: a.resourceType.String(), ResourceName: a.name, PatternType: a.pattern.String(),
		Principal: a.principal, Host: a.host, Operation: a.operation.String(), Permission: a.permission.String()}
}

func aclFromRow(r repo.SyncedACL) (aclEntry, error) {
	a := aclEntry{name: r.ResourceName, principal: r.Principal, host: r.Host}
	var errs [4]error
	a.resourceType, errs[0] = kmsg.ParseACLResourceType(r.ResourceType)
	a.pattern, errs[1] = kmsg.ParseACLResourcePatternType(r.PatternType)
	a.operation, errs[2] = kmsg.ParseACLOperation(r.Operation)
	a.permission, errs[3] = kmsg.ParseACLPermissionType(r.Permission)
	return a, errors.Join(errs[:]...)
}

// isReadOnlyACL reports whether a is kmirror's read-only ACL of a mirror
// topic (DENY WRITE for User:* from any host), which the sync never copies
// nor touches.
func isReadOnlyACL(a aclEntry) bool {
	return a.resourceType == kmsg.ACLResourceTypeTopic && a.pattern == kmsg.ACLResourcePatternTypeLiteral &&
		a.principal == "User:*" && a.host == "*" && a.operation == kmsg.ACLOperationWrite &&
		a.permission == kmsg.ACLPermissionTypeDeny
}

// syncACLs copies to the destination the source's literal and prefixed
// ACLs on the mirror's topics and on the groups the offset sync covers
// (matching groups.include, not groups.exclude) whose names match
// acls.include (copiesACL), renamed as the topics and groups are there
// (toDestination). kmirror records each ACL it creates, by its destination
// names, in Postgres and in __mirror_state; one it created that the source
// has since dropped is deleted. ACLs it did not create, other mirrors'
// included, are never touched.
func (p *syncPass) syncACLs(o *service.SyncOutcome) error {
	if p.srcErr != nil {
		return p.srcErr
	}
	if p.dstErr != nil {
		return p.dstErr
	}
	s := p.r.s
	var srcACLs, dstACLs []aclEntry
	err := p.within("source describe ACLs", func(ctx context.Context) (err error) {
		srcACLs, err = describeAllACLs(ctx, p.src.cl)
		return err
	})
	if errors.Is(err, kerr.SecurityDisabled) {
		o.Items = append(o.Items, service.SyncItem{Name: "*", Action: "skipped", Detail: "the source cluster has no authorizer: no ACLs to copy"})
		return nil
	} else if err != nil {
		return fmt.Errorf("source cluster at %s: %w", p.mirror.BootstrapServers, err)
	}
	err = p.within("destination describe ACLs", func(ctx context.Context) (err error) {
		dstACLs, err = describeAllACLs(ctx, s.dst)
		return err
	})
	if errors.Is(err, kerr.SecurityDisabled) {
		o.Items = append(o.Items, service.SyncItem{Name: "*", Action: "skipped", Detail: "the destination cluster has no authorizer: ACLs cannot be copied"})
		return nil
	} else if err != nil {
		return fmt.Errorf("destination cluster: %w", err)
	}
	tracked, err := repo.SyncedACLsList(p.ctx, s.cfg.Pool, p.mirror.Name)
	if err != nil {
		return err
	}

	// want maps each destination ACL to the source ACL it copies.
	want := map[aclEntry]aclEntry{}
	for _, a := range srcACLs {
		if p.copiesACL(a) {
			want[p.toDestination(a)] = a
		}
	}
	have := map[aclEntry]bool{}
	for _, a := range dstACLs {
		have[a] = true
	}

	// Create what the destination lacks. An identical ACL already there is
	// either ours from an earlier pass or a local one: left as it is, and a
	// local one is not claimed.
	var create []aclEntry
	for a := range want {
		if !have[a] {
			create = append(create, a)
		}
	}
	// from says which source ACL a created one copies, when its names
	// differ.
	from := func(a aclEntry) string {
		if src := want[a]; src != a {
			return "copies the source's " + src.String()
		}
		return ""
	}
	slices.SortFunc(create, func(a, b aclEntry) int { return cmp.Compare(a.String(), b.String()) })
	if len(create) > 0 {
		if err := p.guard(); err != nil {
			return err
		}
		// Recorded (and queued for __mirror_state) before they are
		// created: a crash in between leaves a record of an ACL that may
		// not exist, never an ACL of ours that nobody knows about.
		rows := make([]repo.SyncedACL, len(create))
		for i, a := range create {
			rows[i] = a.row()
		}
		if err := p.svc().RecordSyncedACLs(p.ctx, p.mirror.Name, rows); err != nil {
			return err
		}
		var errs []error
		err := p.within("destination create ACLs", func(ctx context.Context) (err error) {
			errs, err = createACLs(ctx, s.dst, create)
			return err
		})
		for i, a := range create {
			switch {
			case err != nil:
				o.Items = append(o.Items, service.SyncItem{Name: a.String(), Action: "failed", Detail: joinDetail(err.Error(), from(a))})
			case errs[i] != nil:
				o.Items = append(o.Items, service.SyncItem{Name: a.String(), Action: "failed", Detail: joinDetail(errs[i].Error(), from(a))})
			default:
				o.Items = append(o.Items, service.SyncItem{Name: a.String(), Action: "created", Detail: from(a)})
			}
		}
	}

	// Delete the ACLs kmirror created that the source no longer has (or
	// that are no longer synced).
	var drop []aclEntry
	for _, r := range tracked {
		a, err := aclFromRow(r)
		if err != nil {
			o.Items = append(o.Items, service.SyncItem{Name: fmt.Sprint(r), Action: "failed", Detail: fmt.Sprintf("unreadable record: %v", err)})
			continue
		}
		if _, ok := want[a]; !ok {
			drop = append(drop, a)
		}
	}
	// The ones gone from the destination are forgotten together at the
	// end (one transaction, one new set for __mirror_state). A pass cut
	// short before that leaves them recorded: the next one finds them
	// absent from the destination and forgets them then.
	var gone []repo.SyncedACL
	for _, a := range drop {
		if err := p.guard(); err != nil {
			return err
		}
		if have[a] {
			err := p.within("destination delete ACLs", func(ctx context.Context) error {
				return deleteACL(ctx, s.dst, a)
			})
			if err != nil {
				o.Items = append(o.Items, service.SyncItem{Name: a.String(), Action: "failed", Detail: err.Error()})
				continue
			}
			o.Items = append(o.Items, service.SyncItem{Name: a.String(), Action: "deleted", Detail: "no longer on the source"})
		}
		gone = append(gone, a.row())
	}
	return p.svc().ForgetSyncedACLs(p.ctx, p.mirror.Name, gone)
}

// copiesACL says whether a source ACL is one the sync keeps on the
// destination. Its source name (a prefix, for a PREFIXED one) must match
// acls.include. A LITERAL topic ACL must name a mirrored topic, a PREFIXED
// one must cover at least one, not counting a stopped topic whose
// destination topic another mirror writes now (that mirror's source says
// who may use it); a group ACL's name or prefix must match the group
// filters. A LITERAL * on topics names no mirrored topic, so it is not
// copied: on the destination it would reach every topic, other mirrors'
// and local ones. MATCH and ANY are only filters of Kafka's describe and
// delete requests, never a stored binding, so a source cannot have one;
// they, and any pattern type this kmirror does not know, are never copied.
// Neither is kmirror's read-only ACL shape: on the destination it would be
// indistinguishable from the read-only ACL of the mirror topic.
func (p *syncPass) copiesACL(a aclEntry) bool {
	if isReadOnlyACL(a) || !service.Matches(p.cfg.ACLsInclude, a.name) {
		return false
	}
	if a.pattern != kmsg.ACLResourcePatternTypeLiteral && a.pattern != kmsg.ACLResourcePatternTypePrefixed {
		return false
	}
	switch a.resourceType {
	case kmsg.ACLResourceTypeTopic:
		if a.pattern == kmsg.ACLResourcePatternTypeLiteral {
			_, ok := p.topics[a.name]
			_, other := p.writtenElsewhere(a.name)
			return ok && !other
		}
		for name := range p.topics {
			if _, other := p.writtenElsewhere(name); strings.HasPrefix(name, a.name) && !other {
				return true
			}
		}
		return false
	case kmsg.ACLResourceTypeGroup:
		return service.Matches(p.cfg.GroupsInclude, a.name) && !service.Matches(p.cfg.GroupsExclude, a.name)
	}
	return false
}

// toDestination renames a source ACL's resource as the mirror names it on
// the destination: a topic's by topic.name.prefix (a LITERAL one by its
// topic row's destination name, which the prefix made), a group's by
// group.name.prefix, as it is now. A PREFIXED pattern gets the prefix in
// front, so it covers the same topics or groups under their destination
// names and nothing of another mirror's prefix. A LITERAL * (every topic or
// group) stays *: prefixed it would name one resource called "east.*".
func (p *syncPass) toDestination(a aclEntry) aclEntry {
	if a.pattern == kmsg.ACLResourcePatternTypeLiteral && a.name == "*" {
		return a
	}
	switch a.resourceType {
	case kmsg.ACLResourceTypeTopic:
		if _, ok := p.topics[a.name]; ok && a.pattern == kmsg.ACLResourcePatternTypeLiteral {
			a.name = p.dest(a.name)
		} else {
			a.name = service.DestinationTopic(p.mirror.Config, a.name)
		}
	case kmsg.ACLResourceTypeGroup:
		a.name = service.DestinationGroup(p.mirror.Config, a.name)
	}
	return a
}

// joinDetail joins the non-empty parts of a report item's detail.
func joinDetail(parts ...string) string {
	return strings.Join(slices.DeleteFunc(parts, func(s string) bool { return s == "" }), "; ")
}

// describeAllACLs lists every ACL of a cluster.
func describeAllACLs(ctx context.Context, cl *kgo.Client) ([]aclEntry, error) {
	req := kmsg.NewPtrDescribeACLsRequest()
	req.ResourceType = kmsg.ACLResourceTypeAny
	req.ResourcePatternType = kmsg.ACLResourcePatternTypeAny
	req.Operation = kmsg.ACLOperationAny
	req.PermissionType = kmsg.ACLPermissionTypeAny
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return nil, err
	}
	if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
		if resp.ErrorMessage != nil {
			return nil, fmt.Errorf("%w: %s", err, *resp.ErrorMessage)
		}
		return nil, err
	}
	var out []aclEntry
	for _, r := range resp.Resources {
		for _, a := range r.ACLs {
			out = append(out, aclEntry{resourceType: r.ResourceType, name: r.ResourceName, pattern: r.ResourcePatternType,
				principal: a.Principal, host: a.Host, operation: a.Operation, permission: a.PermissionType})
		}
	}
	return out, nil
}

// createACLs creates ACLs in one request and returns each one's error.
func createACLs(ctx context.Context, cl *kgo.Client, acls []aclEntry) ([]error, error) {
	req := kmsg.NewPtrCreateACLsRequest()
	for _, a := range acls {
		c := kmsg.NewCreateACLsRequestCreation()
		c.ResourceType, c.ResourceName, c.ResourcePatternType = a.resourceType, a.name, a.pattern
		c.Principal, c.Host, c.Operation, c.PermissionType = a.principal, a.host, a.operation, a.permission
		req.Creations = append(req.Creations, c)
	}
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return nil, err
	}
	if len(resp.Results) != len(acls) {
		return nil, fmt.Errorf("create ACLs: %d results for %d ACLs", len(resp.Results), len(acls))
	}
	errs := make([]error, len(acls))
	for i, r := range resp.Results {
		if err := kerr.ErrorForCode(r.ErrorCode); err != nil {
			errs[i] = err
			if r.ErrorMessage != nil {
				errs[i] = fmt.Errorf("%w: %s", err, *r.ErrorMessage)
			}
		}
	}
	return errs, nil
}

// deleteACL deletes exactly one ACL: every field of the filter is set, so
// it matches nothing else.
func deleteACL(ctx context.Context, cl *kgo.Client, a aclEntry) error {
	req := kmsg.NewPtrDeleteACLsRequest()
	f := kmsg.NewDeleteACLsRequestFilter()
	f.ResourceType, f.ResourceName, f.ResourcePatternType = a.resourceType, kmsg.StringPtr(a.name), a.pattern
	f.Principal, f.Host = kmsg.StringPtr(a.principal), kmsg.StringPtr(a.host)
	f.Operation, f.PermissionType = a.operation, a.permission
	req.Filters = append(req.Filters, f)
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return err
	}
	for _, r := range resp.Results {
		if err := kerr.ErrorForCode(r.ErrorCode); err != nil {
			return err
		}
		for _, m := range r.MatchingACLs {
			if err := kerr.ErrorForCode(m.ErrorCode); err != nil {
				return err
			}
		}
	}
	return nil
}
