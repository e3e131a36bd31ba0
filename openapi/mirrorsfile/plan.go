package mirrorsfile

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"sort"

	"kmirror/openapi/client"
)

// Opts are the choices a plan needs that the file does not make.
type Opts struct {
	// Prune deletes the mirrors the file does not name, and removes
	// (fails over) the topics of named mirrors that no entry matches.
	// Without it they are left alone and listed as not in the file.
	Prune bool
	// UpdateSecrets sends every secret the file gives to the mirrors that
	// exist. The API never returns secrets, so a plan cannot tell whether
	// one changed: without it a secret is sent on create, when the server
	// does not have it, and with any other change to the same source.
	UpdateSecrets bool
	// RestartStopped restarts a stopped (removed) topic that an entry
	// wants mirroring or paused: a failback, which copies again what the
	// source holds past its checkpoint, with the entry's recreate or
	// continue. Without it such topics are held back and listed.
	RestartStopped bool
	// SkipChecks adds topics without the server's preflight checks of the
	// clusters (topics:add's skip_checks).
	SkipChecks bool
}

// Action is what a step does.
type Action string

const (
	ActionCreate  Action = "create"
	ActionUpdate  Action = "update"
	ActionAdd     Action = "add"
	ActionRestart Action = "restart"
	ActionResume  Action = "resume"
	ActionPause   Action = "pause"
	ActionRemove  Action = "remove"
	ActionDelete  Action = "delete"
)

// phase orders steps across mirrors: every mirror is created and updated
// (a new topic.name.prefix first) before topics are added; additions come
// before pauses, and removals (failovers) and deletions last, so a failed
// step leaves nothing made writable that the file still wanted mirrored.
var phase = map[Action]int{ActionCreate: 0, ActionUpdate: 0, ActionAdd: 1, ActionRestart: 1, ActionResume: 2,
	ActionPause: 3, ActionRemove: 4, ActionDelete: 5}

// Step is one change of a plan.
type Step struct {
	Mirror string
	Action Action
	// Topics are the source topics an add, restart, resume, pause or
	// remove acts on, with their destination names; for an add to a
	// mirror still to be created, none: Pattern is resolved once it
	// exists.
	Topics  []TopicRef
	Pattern string
	// State is what a new mirror's topics matching Pattern will be.
	State State
	// ReplicationFactor is an add's (0: the destination's default).
	ReplicationFactor int
	// Changes are an update's, field by field.
	Changes []Change
	// Failover, for a remove, is what a failover now would leave behind
	// (topics:remove?dry_run=true).
	Failover []client.TopicFailoverPreview

	create *client.CreateMirrorRequest
	update *client.UpdateMirrorRequest
	add    *client.AddTopicsRequest
	spec   *Mirror // a created mirror's, whose topics are resolved after it
	dir    string
	// skipChecks is Opts.SkipChecks, for an add.
	skipChecks bool
}

// TopicRef is a source topic and the destination topic it is written to.
type TopicRef struct {
	Topic            string
	DestinationTopic string
	// Partitions is known for an add (0 otherwise).
	Partitions int
}

// Change is one field an update changes. A secret's From and To say only
// whether it is set and where it comes from.
type Change struct {
	Field    string
	From, To string
	Secret   bool
	// Why says, for a secret, why it is sent though it cannot be compared.
	Why string
}

// Plan is what Apply would do to make the deployment match the file, and
// what it would leave alone.
type Plan struct {
	Steps []Step
	// NotInFile lists the mirrors and topics the file does not name, left
	// alone without Opts.Prune: "mirror old (2 topics)", "demo: audit
	// (mirroring)".
	NotInFile []string
	// Held lists what the file asks and the options hold back, with why.
	Held []string
	// Notes are differences Apply cannot change, such as an existing
	// topic's replication factor.
	Notes []string
	Opts  Opts
}

// Changes says whether applying the plan would change anything.
func (p *Plan) Changes() bool { return len(p.Steps) > 0 }

// NewPlan reads the deployment through the API (mirrors, their topics,
// and dry runs of the changes, which the server validates without
// writing) and says what Apply would change to make it match f.
func NewPlan(ctx context.Context, api API, f *File, opts Opts) (*Plan, error) {
	if opts.Prune && len(f.Mirrors) == 0 {
		// Most likely a file emptied by mistake: pruning against it would
		// fail over every topic of the deployment.
		return nil, fmt.Errorf("the file names no mirror: with prune that would delete every mirror; delete them one by one instead")
	}
	list, err := call(ctx, "GET /v1/mirrors", func() (*client.ListMirrorsResponse, error) {
		return api.ListMirrorsWithResponse(ctx)
	}, http.StatusOK)
	if err != nil {
		return nil, err
	}
	if list.JSON200 == nil {
		return nil, fmt.Errorf("GET /v1/mirrors: no mirror list in the answer")
	}
	current := map[string]client.Mirror{}
	for _, m := range list.JSON200.Mirrors {
		current[m.Name] = m
	}
	p := &Plan{Opts: opts}
	named := map[string]bool{}
	for i := range f.Mirrors {
		m := &f.Mirrors[i]
		named[m.Name] = true
		cur, ok := current[m.Name]
		if !ok {
			if err := p.planCreate(ctx, api, f.dir, m); err != nil {
				return nil, err
			}
			continue
		}
		if err := p.planUpdate(ctx, api, f.dir, m, cur, opts); err != nil {
			return nil, err
		}
		topics, err := listTopics(ctx, api, m.Name)
		if err != nil {
			return nil, err
		}
		if err := p.planTopics(ctx, api, m, topics, opts); err != nil {
			return nil, err
		}
	}
	var others []string
	for name := range current {
		if !named[name] {
			others = append(others, name)
		}
	}
	slices.Sort(others)
	for _, name := range others {
		topics, err := listTopics(ctx, api, name)
		if err != nil {
			return nil, err
		}
		var live []string
		for _, t := range topics {
			if t.DesiredState != client.DesiredStateStopped {
				live = append(live, t.Topic)
			}
		}
		if !opts.Prune {
			p.NotInFile = append(p.NotInFile, fmt.Sprintf("mirror %s (%d topic(s) mirroring or paused)", name, len(live)))
			continue
		}
		if err := p.planRemove(ctx, api, name, topics, live); err != nil {
			return nil, err
		}
		p.Steps = append(p.Steps, Step{Mirror: name, Action: ActionDelete})
	}
	order := map[string]int{}
	for i, m := range f.Mirrors {
		order[m.Name] = i
	}
	sort.SliceStable(p.Steps, func(i, j int) bool {
		a, b := p.Steps[i], p.Steps[j]
		if phase[a.Action] != phase[b.Action] {
			return phase[a.Action] < phase[b.Action]
		}
		return order[a.Mirror] < order[b.Mirror]
	})
	return p, nil
}

func listTopics(ctx context.Context, api API, mirror string) ([]client.Topic, error) {
	resp, err := call(ctx, "GET /v1/mirrors/"+mirror+"/topics", func() (*client.ListTopicsResponse, error) {
		return api.ListTopicsWithResponse(ctx, mirror)
	}, http.StatusOK)
	if err != nil {
		return nil, err
	}
	if resp.JSON200 == nil {
		return nil, fmt.Errorf("GET /v1/mirrors/%s/topics: no topic list in the answer", mirror)
	}
	return resp.JSON200.Topics, nil
}

// planCreate asks the server to validate the new mirror (a dry run, which
// also reaches its source) and defers its topics until it exists.
func (p *Plan) planCreate(ctx context.Context, api API, dir string, m *Mirror) error {
	src, err := m.Source.spec(dir)
	if err != nil {
		return fmt.Errorf("mirror %s: %w", m.Name, err)
	}
	body := &client.CreateMirrorRequest{Name: m.Name, Source: src}
	if len(m.Config) > 0 {
		body.Config = ptr(m.Config)
	}
	if _, err := call(ctx, "POST /v1/mirrors?dry_run=true ("+m.Name+")", func() (*client.CreateMirrorResponse, error) {
		return api.CreateMirrorWithResponse(ctx, &client.CreateMirrorParams{DryRun: ptr(true)}, *body)
	}, http.StatusOK, http.StatusCreated); err != nil {
		return err
	}
	p.Steps = append(p.Steps, Step{Mirror: m.Name, Action: ActionCreate, Changes: m.Source.summary(m.Config), create: body, spec: m, dir: dir})
	for _, t := range m.Topics {
		if s := t.state(); s != StateStopped {
			p.Steps = append(p.Steps, Step{Mirror: m.Name, Action: ActionAdd, Pattern: t.Topic, State: s, ReplicationFactor: t.ReplicationFactor})
		}
	}
	return nil
}

// planUpdate compares the file's source and config with the mirror's and,
// when they differ, asks the server to validate the patch (a dry run).
func (p *Plan) planUpdate(ctx context.Context, api API, dir string, m *Mirror, cur client.Mirror, opts Opts) error {
	patch, changes, err := diffSource(dir, m, cur, opts)
	if err != nil {
		return fmt.Errorf("mirror %s: %w", m.Name, err)
	}
	cfg := map[string]*string{}
	for _, k := range sortedKeys(m.Config) {
		if v, ok := cur.Config[k]; !ok || v != m.Config[k] {
			cfg[k] = ptr(m.Config[k])
			changes = append(changes, Change{Field: "config " + k, From: valueOr(cur.Config, k, "(default)"), To: m.Config[k]})
		}
	}
	for _, k := range sortedKeys(cur.Config) {
		if _, ok := m.Config[k]; !ok {
			cfg[k] = nil
			changes = append(changes, Change{Field: "config " + k, From: cur.Config[k], To: "(default)"})
		}
	}
	if len(changes) == 0 {
		return nil
	}
	body := &client.UpdateMirrorRequest{Source: patch}
	if len(cfg) > 0 {
		body.Config = &cfg
	}
	if _, err := call(ctx, "PATCH /v1/mirrors/"+m.Name+"?dry_run=true", func() (*client.UpdateMirrorResponse, error) {
		return api.UpdateMirrorWithResponse(ctx, m.Name, &client.UpdateMirrorParams{DryRun: ptr(true)}, *body)
	}, http.StatusOK); err != nil {
		return err
	}
	p.Steps = append(p.Steps, Step{Mirror: m.Name, Action: ActionUpdate, Changes: changes, update: body})
	return nil
}

func valueOr(m map[string]string, k, def string) string {
	if v, ok := m[k]; ok {
		return v
	}
	return def
}

// planTopics compares a mirror's topics with the file's entries. Each
// topic, in the deployment or on the source, is governed by the first
// entry whose pattern matches it.
func (p *Plan) planTopics(ctx context.Context, api API, m *Mirror, topics []client.Topic, opts Opts) error {
	res := make([]*regexpEntry, len(m.Topics))
	for i, t := range m.Topics {
		re, err := compilePattern(t.Topic)
		if err != nil {
			return err
		}
		res[i] = &regexpEntry{Topic: t, match: re.MatchString}
	}
	governor := func(name string) int {
		for i, e := range res {
			if e.match(name) {
				return i
			}
		}
		return -1
	}
	existing := map[string]client.Topic{}
	for _, t := range topics {
		existing[t.Topic] = t
	}

	var resume, pause, remove []TopicRef
	for _, t := range topics {
		ref := TopicRef{Topic: t.Topic, DestinationTopic: t.DestinationTopic}
		g := governor(t.Topic)
		if g < 0 {
			if t.DesiredState == client.DesiredStateStopped {
				continue
			}
			if opts.Prune {
				remove = append(remove, ref)
			} else {
				p.NotInFile = append(p.NotInFile, fmt.Sprintf("%s: topic %s (%s)", m.Name, t.Topic, t.DesiredState))
			}
			continue
		}
		e := res[g]
		want := e.state()
		if rf := e.ReplicationFactor; rf != 0 && rf != t.ReplicationFactor && t.DesiredState != client.DesiredStateStopped {
			p.Notes = append(p.Notes, fmt.Sprintf("%s: topic %s has replication factor %d, the file %d: kmirror sets it only when it creates the destination topic (a restart), so it is not changed",
				m.Name, t.Topic, t.ReplicationFactor, rf))
		}
		switch {
		case string(want) == string(t.DesiredState):
		case want == StateStopped:
			remove = append(remove, ref)
		case t.DesiredState == client.DesiredStateStopped:
			// A restart: found on the source below, with the new topics.
		case want == StateMirroring:
			resume = append(resume, ref)
		case want == StatePaused:
			pause = append(pause, ref)
		}
	}

	// The source topics each mirroring or paused entry matches that the
	// mirror does not mirror yet (or mirrored once: stopped).
	seen := map[string]bool{}
	for i, e := range res {
		want := e.state()
		if want == StateStopped {
			continue
		}
		matches, err := p.newMatches(ctx, api, m.Name, e.Topic.Topic, existing)
		if err != nil {
			return err
		}
		var adds, restarts []TopicRef
		for _, mt := range matches {
			if seen[mt.Topic] || governor(mt.Topic) != i {
				continue
			}
			seen[mt.Topic] = true
			ref := TopicRef{Topic: mt.Topic, DestinationTopic: mt.DestinationTopic, Partitions: mt.Partitions}
			if t, ok := existing[mt.Topic]; ok && t.DesiredState == client.DesiredStateStopped {
				if !opts.RestartStopped {
					p.Held = append(p.Held, fmt.Sprintf("%s: topic %s is stopped (removed) and the file wants it %s: restarting it is a failback, which copies again; give --restart-stopped (with the entry's recreate or continue if the destination was written to)",
						m.Name, mt.Topic, want))
					continue
				}
				restarts = append(restarts, ref)
			} else {
				adds = append(adds, ref)
			}
			if want == StatePaused {
				pause = append(pause, ref)
			}
		}
		for _, s := range []struct {
			action Action
			refs   []TopicRef
		}{{ActionAdd, adds}, {ActionRestart, restarts}} {
			if len(s.refs) == 0 {
				continue
			}
			body := &client.AddTopicsRequest{ReplicationFactor: ptrOrNil(e.ReplicationFactor)}
			if s.action == ActionRestart {
				body.Recreate, body.Continue, body.KeepDivergent = ptrOrNil(e.Recreate), ptrOrNil(e.Continue), ptrOrNil(e.KeepDivergent)
			}
			p.Steps = append(p.Steps, Step{Mirror: m.Name, Action: s.action, Topics: s.refs, Pattern: e.Topic.Topic, State: want,
				ReplicationFactor: e.ReplicationFactor, add: body, skipChecks: opts.SkipChecks})
		}
	}
	if len(resume) > 0 {
		p.Steps = append(p.Steps, Step{Mirror: m.Name, Action: ActionResume, Topics: resume})
	}
	if len(pause) > 0 {
		p.Steps = append(p.Steps, Step{Mirror: m.Name, Action: ActionPause, Topics: pause})
	}
	return p.planRemove(ctx, api, m.Name, topics, refNames(remove))
}

type regexpEntry struct {
	Topic
	match func(string) bool
}

func refNames(refs []TopicRef) []string {
	names := make([]string, len(refs))
	for i, r := range refs {
		names[i] = r.Topic
	}
	return names
}

// planRemove adds a remove of names, with the failover preview the server
// reads for it.
func (p *Plan) planRemove(ctx context.Context, api API, mirror string, topics []client.Topic, names []string) error {
	if len(names) == 0 {
		return nil
	}
	slices.Sort(names)
	dest := map[string]string{}
	for _, t := range topics {
		dest[t.Topic] = t.DestinationTopic
	}
	step := Step{Mirror: mirror, Action: ActionRemove}
	for _, n := range names {
		step.Topics = append(step.Topics, TopicRef{Topic: n, DestinationTopic: dest[n]})
	}
	for _, pattern := range patternChunks(names) {
		resp, err := call(ctx, "POST /v1/mirrors/"+mirror+"/topics:remove?dry_run=true", func() (*client.RemoveTopicsResponse, error) {
			return api.RemoveTopicsWithResponse(ctx, mirror, &client.RemoveTopicsParams{DryRun: ptr(true)}, client.TopicsRequest{Topic: pattern})
		}, http.StatusOK)
		if err != nil {
			return err
		}
		if resp.JSON200 != nil && resp.JSON200.Failover != nil {
			step.Failover = append(step.Failover, *resp.JSON200.Failover...)
		}
	}
	p.Steps = append(p.Steps, step)
	return nil
}

// newMatches returns the source topics pattern matches that the mirror
// neither mirrors nor pauses, from topics:add?dry_run=true (which also
// checks that they can be added). That dry run refuses a pattern matching
// a topic already mirrored (409, all or nothing), and the API has no list
// of the source's topics: a literal pattern is then narrowed to the names
// not mirrored yet, and any other is listed by the mirror's preflight
// check (POST :check), which reports the topics a pattern matches.
func (p *Plan) newMatches(ctx context.Context, api API, mirror, pattern string, existing map[string]client.Topic) ([]client.TopicMatch, error) {
	live := func(name string) bool {
		t, ok := existing[name]
		return ok && t.DesiredState != client.DesiredStateStopped
	}
	if names, ok := literalNames(pattern); ok {
		var candidates []string
		for _, n := range names {
			if !live(n) {
				candidates = append(candidates, n)
			}
		}
		matches, err := p.dryRunAdd(ctx, api, mirror, candidates, pattern)
		return matches, err
	}
	matches, err := p.dryRunAddPattern(ctx, api, mirror, pattern)
	pe, conflict := is(err, client.ProblemTypeConflict)
	if !conflict {
		return matches, err
	}
	for _, t := range deref(pe.Problem.Topics) {
		if t.MirroredBy != nil && *t.MirroredBy != "" {
			return nil, err // another mirror's topic: the file cannot have it
		}
	}
	resp, cerr := call(ctx, "POST /v1/mirrors/"+mirror+":check", func() (*client.CheckMirrorResponse, error) {
		return api.CheckMirrorWithResponse(ctx, mirror, client.CheckMirrorJSONRequestBody{Topic: ptr(pattern)})
	}, http.StatusOK)
	if cerr != nil {
		return nil, cerr
	}
	var candidates []string
	if resp.JSON200 != nil {
		for _, n := range resp.JSON200.Topics {
			if !live(n) {
				candidates = append(candidates, n)
			}
		}
	}
	return p.dryRunAdd(ctx, api, mirror, candidates, pattern)
}

// dryRunAdd resolves exact names on the source; names it does not have
// are noted, not an error.
func (p *Plan) dryRunAdd(ctx context.Context, api API, mirror string, names []string, entry string) ([]client.TopicMatch, error) {
	var out []client.TopicMatch
	for _, pattern := range patternChunks(names) {
		m, err := p.dryRunAddPattern(ctx, api, mirror, pattern)
		if err != nil {
			return nil, err
		}
		out = append(out, m...)
	}
	found := map[string]bool{}
	for _, m := range out {
		found[m.Topic] = true
	}
	for _, n := range names {
		if !found[n] {
			p.Notes = append(p.Notes, fmt.Sprintf("%s: topic %s (entry %q) is not on the source cluster: nothing to add", mirror, n, entry))
		}
	}
	return out, nil
}

// dryRunAddPattern is topics:add?dry_run=true; a pattern that matches no
// source topic is a note, not an error.
func (p *Plan) dryRunAddPattern(ctx context.Context, api API, mirror, pattern string) ([]client.TopicMatch, error) {
	resp, err := call(ctx, "POST /v1/mirrors/"+mirror+"/topics:add?dry_run=true", func() (*client.AddTopicsResponse, error) {
		return api.AddTopicsWithResponse(ctx, mirror, &client.AddTopicsParams{DryRun: ptr(true), SkipChecks: ptrOrNil(p.Opts.SkipChecks)},
			client.AddTopicsRequest{Topic: pattern})
	}, http.StatusOK)
	if _, ok := is(err, client.ProblemTypeNoMatch); ok {
		if _, literal := literalNames(pattern); !literal {
			p.Notes = append(p.Notes, fmt.Sprintf("%s: entry %q matches no topic on the source cluster", mirror, pattern))
		}
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	if resp.JSON200 == nil {
		return nil, nil
	}
	return deref(resp.JSON200.Matches), nil
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
