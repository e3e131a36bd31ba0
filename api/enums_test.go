package api

import (
	"encoding/json"
	"maps"
	"slices"
	"testing"

	"kmirror/internal/vocabulary/states"
	"kmirror/openapi"
	"kmirror/service"
)

// TestEnumsMatchTheServer checks each closed set the spec declares against
// the list the server itself uses, in the generated document, so a state,
// event kind or protocol added on one side only fails here.
func TestEnumsMatchTheServer(t *testing.T) {
	partitionStates := []string{states.Unknown.String()}
	for _, s := range states.All {
		partitionStates = append(partitionStates, s.String())
	}
	var problemTypes []string
	for _, k := range problemKinds {
		problemTypes = append(problemTypes, string(k.typ))
	}
	var roleNames []string
	for _, r := range roles {
		roleNames = append(roleNames, string(r))
	}
	want := map[string][]string{
		"PartitionState": partitionStates,
		"DesiredState": {string(states.DesiredMirroring), string(states.DesiredPaused),
			string(states.DesiredStopped)},
		"EventKind":        service.EventKinds,
		"SecurityProtocol": service.SecurityProtocols,
		"SASLMechanism":    service.SASLMechanisms,
		"ProblemType":      problemTypes,
		"Role":             roleNames,
		"TopicsAction":     {"add", "pause", "resume", "remove"},
		"MirrorState":      {string(service.MirrorReady), string(service.MirrorNeedsCredentials)},
	}
	var doc struct {
		Components struct {
			Schemas map[string]struct {
				Enum []string `json:"enum"`
			} `json:"schemas"`
		} `json:"components"`
	}
	if err := json.Unmarshal(openapi.JSON, &doc); err != nil {
		t.Fatal(err)
	}
	for name, values := range want {
		got := doc.Components.Schemas[name].Enum
		if !sameSet(got, values) {
			t.Errorf("schema %s: enum %v, the server's list %v", name, got, values)
		}
	}
	// Each event kind has its shape: the Event oneOf's discriminator maps
	// every kind, and nothing else.
	var events struct {
		Components struct {
			Schemas struct {
				Event struct {
					Discriminator struct {
						Mapping map[string]string `json:"mapping"`
					} `json:"discriminator"`
				} `json:"Event"`
			} `json:"schemas"`
		} `json:"components"`
	}
	if err := json.Unmarshal(openapi.JSON, &events); err != nil {
		t.Fatal(err)
	}
	mapped := slices.Collect(maps.Keys(events.Components.Schemas.Event.Discriminator.Mapping))
	if !sameSet(mapped, service.EventKinds) {
		t.Errorf("Event's discriminator maps the kinds %v, the server's list %v", mapped, service.EventKinds)
	}
	// Every partition state has its field in PartitionStateCounts.
	var c PartitionStateCounts
	for i, s := range partitionStates {
		c.add(s, i+1)
	}
	b, _ := json.Marshal(c)
	var counts map[string]int
	_ = json.Unmarshal(b, &counts)
	for i, s := range partitionStates {
		if counts[s] != i+1 {
			t.Errorf("PartitionStateCounts counts %s as %d, want %d (%s)", s, counts[s], i+1, b)
		}
	}
}

func sameSet(a, b []string) bool {
	a, b = slices.Clone(a), slices.Clone(b)
	slices.Sort(a)
	slices.Sort(b)
	return slices.Equal(a, b)
}
