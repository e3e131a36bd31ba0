package schemaregistry

import (
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
)

// Selection says which source subjects a sync copies and what they are
// called on the destination. Every subject a selected one references is
// copied too, whether or not it is selected.
type Selection struct {
	// Topics selects <topic>-key and <topic>-value for each topic
	// (TopicNameStrategy), where the source has them.
	Topics []string
	// TopicPrefix is the mirror's topic.name.prefix. The destination topic
	// is <prefix><topic>, so its subjects are <prefix><topic>-key and
	// <prefix><topic>-value. It renames only the subjects Topics selects:
	// other subjects (RecordNameStrategy, shared types) keep their names.
	TopicPrefix string
	// SubjectRegex selects the source subjects whose whole name matches,
	// for RecordNameStrategy subjects and shared types. Empty selects none.
	SubjectRegex string
	// Context is the destination registry context the subjects are written
	// into, such as ".east": a subject S becomes :.east:S there, and its
	// schema ids are counted apart from every other context's. Empty (or
	// ".") writes into the default context.
	Context string
}

// validate checks the selection and compiles its regex.
func (s Selection) validate() (*regexp.Regexp, error) {
	if len(s.Topics) == 0 && s.SubjectRegex == "" {
		return nil, errors.New("selection: names no topic and no subject regex, so it selects nothing")
	}
	for _, t := range s.Topics {
		if t == "" || strings.ContainsAny(t, ":/") {
			return nil, fmt.Errorf("selection: topic %q is not a Kafka topic name", t)
		}
	}
	if strings.ContainsAny(s.TopicPrefix, ":/") {
		return nil, fmt.Errorf("selection: topic prefix %q holds ':' or '/', which no topic name has", s.TopicPrefix)
	}
	if c := s.Context; c != "" && c != "." {
		if !strings.HasPrefix(c, ".") || len(c) < 2 || strings.ContainsAny(c, ":/ ") {
			return nil, fmt.Errorf("selection: context %q: want a dot and a name, such as .east", c)
		}
	}
	var re *regexp.Regexp
	if s.SubjectRegex != "" {
		var err error
		// A whole-name match, as kmirror's topic regexes are.
		re, err = regexp.Compile(`^(?:` + s.SubjectRegex + `)$`)
		if err != nil {
			return nil, fmt.Errorf("selection: subject regex: %w", err)
		}
	}
	return re, nil
}

// context returns the destination context, "" for the default one.
func (s Selection) context() string {
	if s.Context == "." {
		return ""
	}
	return s.Context
}

// topicSubject reports whether source is a subject Topics selects.
func (s Selection) topicSubject(source string) bool {
	for _, suffix := range []string{"-key", "-value"} {
		if t, ok := strings.CutSuffix(source, suffix); ok && slices.Contains(s.Topics, t) {
			return true
		}
	}
	return false
}

// DestinationSubject returns the name source is written under on the
// destination: the topic prefix for a topic's subject, then the context
// qualifier. The lifecycle uses it to find the subjects whose mode it sets.
func (s Selection) DestinationSubject(source string) string {
	name := source
	if s.TopicPrefix != "" && s.topicSubject(source) {
		name = s.TopicPrefix + source
	}
	if c := s.context(); c != "" {
		name = ":" + c + ":" + name
	}
	return name
}

// topicSubjects lists the TopicNameStrategy subjects of Topics, in order.
func (s Selection) topicSubjects() []string {
	var out []string
	for _, t := range s.Topics {
		out = append(out, t+"-key", t+"-value")
	}
	return out
}
