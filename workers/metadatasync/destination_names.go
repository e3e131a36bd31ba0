package metadatasync

import "kmirror/service"

// A mirror's topics and groups keep their source names in Postgres, in the
// filters and in the reports; on the destination they may be named
// otherwise (topic.name.prefix, group.name.prefix), so that mirrors from
// several sources into one destination keep apart. These name them on the
// destination (and toDestination, in acls.go, an ACL's resource).

// dest is a mirror topic's name on the destination: every request the
// sync makes there uses it, while the source, Postgres and the reports
// name the topic by its source name.
func (p *syncPass) dest(name string) string {
	if d := p.topics[name].DestTopic; d != "" {
		return d
	}
	return name
}

// renamed is a mirror topic's destination name when topic.name.prefix
// makes it differ from the source name, else "": a report's
// destination_topic, absent for a mirror without a prefix.
func (p *syncPass) renamed(name string) string {
	if d := p.dest(name); d != name {
		return d
	}
	return ""
}

// item is a report item about a mirror topic, with its destination name.
func (p *syncPass) item(name, action, detail string) service.SyncItem {
	return service.SyncItem{Name: name, DestinationTopic: p.renamed(name), Action: action, Detail: detail}
}

// writtenElsewhere names the mirror writing a topic's destination topic now
// when it is not this one (the topic is stopped here, and another mirror
// took the name over): its configs and ACLs are that mirror's to keep.
func (p *syncPass) writtenElsewhere(name string) (string, bool) {
	w, ok := p.elsewhere[p.dest(name)]
	return w.Mirror, ok
}

// destGroup is a source group's name on the destination.
func (p *syncPass) destGroup(g string) string { return service.DestinationGroup(p.mirror.Config, g) }
