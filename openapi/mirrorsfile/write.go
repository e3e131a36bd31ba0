package mirrorsfile

import (
	"fmt"
	"io"
	"strconv"
	"strings"
)

// Describe is one line saying what a step does (or did).
func (s Step) Describe() string {
	switch s.Action {
	case ActionCreate:
		return "create mirror " + s.Mirror
	case ActionUpdate:
		return "update mirror " + s.Mirror
	case ActionDelete:
		return "delete mirror " + s.Mirror
	case ActionAdd:
		if s.add == nil {
			what := fmt.Sprintf("add to mirror %s: the source topics matching %q, once it exists", s.Mirror, s.Pattern)
			if s.State == StatePaused {
				what += ", then pause them"
			}
			return what
		}
		return fmt.Sprintf("add to mirror %s: %s", s.Mirror, refList(s.Topics, true)) + rfNote(s.ReplicationFactor)
	case ActionRestart:
		return fmt.Sprintf("restart in mirror %s (stopped topics, a failback): %s", s.Mirror, refList(s.Topics, false))
	case ActionResume:
		return fmt.Sprintf("resume in mirror %s: %s", s.Mirror, refList(s.Topics, false))
	case ActionPause:
		return fmt.Sprintf("pause in mirror %s: %s", s.Mirror, refList(s.Topics, false))
	case ActionRemove:
		return fmt.Sprintf("remove from mirror %s (failover: the destination topics become writable): %s", s.Mirror, refList(s.Topics, false))
	}
	return string(s.Action) + " " + s.Mirror
}

func rfNote(rf int) string {
	if rf > 0 {
		return fmt.Sprintf(", replication factor %d", rf)
	}
	return ""
}

// refList names topics as the CLI does: orders → east.orders where a
// prefix makes the destination differ.
func refList(refs []TopicRef, partitions bool) string {
	names := make([]string, len(refs))
	for i, r := range refs {
		names[i] = r.Topic
		if r.DestinationTopic != "" && r.DestinationTopic != r.Topic {
			names[i] += " → " + r.DestinationTopic
		}
		if partitions && r.Partitions > 0 {
			names[i] += fmt.Sprintf(" (%d partition(s))", r.Partitions)
		}
	}
	return strings.Join(names, ", ")
}

// failoverFormat lays out a removal's preview as `kmirror mirrors --remove
// --dry-run` does.
const failoverFormat = "      %-40s %-10s %-12s %-8s %s\n"

// Write prints the plan for a person: each step, what is left alone, held
// back or cannot be changed, and a summary line. name names the file.
func (p *Plan) Write(w io.Writer, name string) {
	switch {
	case !p.Changes() && len(p.Held) > 0:
		fmt.Fprintf(w, "No changes: the deployment matches %s, but for what is held back below.\n", name)
	case !p.Changes():
		fmt.Fprintf(w, "No changes: the deployment matches %s.\n", name)
	default:
		fmt.Fprintf(w, "Plan for %s:\n", name)
		counts := map[Action]int{}
		for _, s := range p.Steps {
			fmt.Fprintf(w, "  %s\n", s.Describe())
			for _, c := range s.Changes {
				fmt.Fprintf(w, "      %s\n", c.describe(s.Action == ActionCreate))
			}
			if s.Action == ActionRemove {
				writeFailover(w, s)
			}
			switch s.Action {
			case ActionCreate, ActionUpdate, ActionDelete:
				counts[s.Action]++
			default:
				counts[s.Action] += max(len(s.Topics), 1)
			}
		}
		fmt.Fprintf(w, "Plan: %d mirror(s) to create, %d to update, %d to delete; topics: %d to add, %d to restart, %d to resume, %d to pause, %d to remove.\n",
			counts[ActionCreate], counts[ActionUpdate], counts[ActionDelete], counts[ActionAdd], counts[ActionRestart],
			counts[ActionResume], counts[ActionPause], counts[ActionRemove])
	}
	section := func(title string, lines []string) {
		if len(lines) == 0 {
			return
		}
		fmt.Fprintln(w, title)
		for _, l := range lines {
			fmt.Fprintf(w, "  %s\n", l)
		}
	}
	section("Not in the file, left alone (--prune removes them):", p.NotInFile)
	section("Held back:", p.Held)
	section("Not changed:", p.Notes)
}

func (c Change) describe(create bool) string {
	switch {
	case create:
		return c.Field + ": " + c.To
	case c.Why != "":
		return fmt.Sprintf("%s: %s → %s (%s)", c.Field, c.From, c.To, c.Why)
	}
	return fmt.Sprintf("%s: %s → %s", c.Field, c.From, c.To)
}

func writeFailover(w io.Writer, s Step) {
	if len(s.Failover) == 0 {
		return
	}
	fmt.Fprintf(w, failoverFormat, "TOPIC", "PARTITION", "STATE", "LAG", "NEWEST-NOT-COPIED")
	var records int
	for _, t := range s.Failover {
		name := t.Topic
		if t.DestinationTopic != "" && t.DestinationTopic != t.Topic {
			name += " → " + t.DestinationTopic
		}
		for _, pt := range t.Partitions {
			lag, newest := "-", "-"
			if pt.Lag != nil {
				lag = strconv.Itoa(*pt.Lag)
			}
			if pt.NewestNotCopied != nil {
				newest = pt.NewestNotCopied.UTC().Format("2006-01-02T15:04:05.000Z07:00")
			}
			fmt.Fprintf(w, failoverFormat, name, strconv.Itoa(pt.Partition), string(pt.State), lag, newest)
		}
		records += max(t.Lag, 0)
	}
	if records == 0 {
		fmt.Fprintln(w, "      A failover now would leave no record behind.")
		return
	}
	fmt.Fprintf(w, "      A failover now would leave %d record(s) behind.\n", records)
}
