package service

import (
	"fmt"
	"regexp"
	"strings"
	"time"
)

// patternBudget bounds the time one action spends matching its pattern
// against topic names. Each match is bounded by the pattern's size (see
// maxPatternInsts), so the budget is checked after every name.
const patternBudget = 2 * time.Second

// patternMatcher matches topic names against an action's pattern within
// patternBudget.
type patternMatcher struct {
	re       *regexp.Regexp
	pattern  string
	deadline time.Time
	n        int
}

func newPatternMatcher(re *regexp.Regexp, pattern string) *patternMatcher {
	return &patternMatcher{re: re, pattern: pattern, deadline: time.Now().Add(patternBudget)}
}

// match reports whether name matches, or a validation error once the
// budget is spent.
func (m *patternMatcher) match(name string) (bool, error) {
	ok := m.re.MatchString(name)
	m.n++
	if time.Now().After(m.deadline) {
		return false, &ValidationError{Fields: []FieldError{{Field: "topic", Message: fmt.Sprintf(
			"pattern %.64q took more than %s to match against %d topic names; use a simpler pattern",
			m.pattern, patternBudget, m.n)}}}
	}
	return ok, nil
}

// maxEventTopics is how many topic names an event's message lists: an add
// of 10,000 topics must not write a 2.5 MB message (the event's outbox
// rows name every topic).
const maxEventTopics = 20

// topicList joins names for an event message, at most maxEventTopics.
func topicList(names []string) string {
	if len(names) <= maxEventTopics {
		return strings.Join(names, ", ")
	}
	return fmt.Sprintf("%s, … and %d more", strings.Join(names[:maxEventTopics], ", "), len(names)-maxEventTopics)
}
