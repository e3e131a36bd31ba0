package schemaregistry

import (
	"bytes"
	"encoding/json"
	"slices"
	"strings"

	"github.com/twmb/franz-go/pkg/sr"
)

// sameSchema reports whether two registered schemas are the same for a
// consumer: the same type, the same text and the same references. Avro and
// JSON texts are compared compacted, since a registry may store a schema
// reformatted; Protobuf text is compared as it is.
//
// regContext is the destination context both are in ("" for the default):
// a reference to a subject of that context compares equal whether it is
// written qualified (:.east:B) or not (B), since a registry may store or
// return it either way.
func sameSchema(a, b sr.Schema, regContext string) bool {
	if a.Type != b.Type || comparableText(a) != comparableText(b) {
		return false
	}
	return slices.Equal(sortedRefs(a.References, regContext), sortedRefs(b.References, regContext))
}

func comparableText(s sr.Schema) string {
	if s.Type == sr.TypeProtobuf {
		return s.Schema
	}
	var buf bytes.Buffer
	if err := json.Compact(&buf, []byte(s.Schema)); err != nil {
		return s.Schema
	}
	return buf.String()
}

func sortedRefs(refs []sr.SchemaReference, regContext string) []sr.SchemaReference {
	out := slices.Clone(refs)
	if regContext != "" {
		for i := range out {
			out[i].Subject = strings.TrimPrefix(out[i].Subject, ":"+regContext+":")
		}
	}
	slices.SortFunc(out, func(a, b sr.SchemaReference) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// destinationSchema returns s as it is written on the destination: its
// references renamed as the subjects they name are.
func (sel Selection) destinationSchema(s sr.Schema) sr.Schema {
	out := s
	out.References = make([]sr.SchemaReference, len(s.References))
	for i, r := range s.References {
		r.Subject = sel.DestinationSubject(r.Subject)
		out.References[i] = r
	}
	if len(out.References) == 0 {
		out.References = nil
	}
	return out
}
