package schemaregistry

import (
	"testing"

	"github.com/twmb/franz-go/pkg/sr"
)

func TestSameSchema(t *testing.T) {
	base := sr.Schema{
		Schema:     `{"type":"record","name":"A","fields":[]}`,
		References: []sr.SchemaReference{{Name: "B", Subject: ":.east:b", Version: 1}, {Name: "C", Subject: "c", Version: 2}},
	}
	with := func(f func(*sr.Schema)) sr.Schema {
		s := base
		s.References = append([]sr.SchemaReference(nil), base.References...)
		f(&s)
		return s
	}
	for _, c := range []struct {
		name string
		b    sr.Schema
		want bool
	}{
		{"itself", base, true},
		{"reformatted JSON", with(func(s *sr.Schema) { s.Schema = "{ \"type\": \"record\",\n \"name\": \"A\", \"fields\": [] }" }), true},
		{"references in another order", with(func(s *sr.Schema) { s.References[0], s.References[1] = s.References[1], s.References[0] }), true},
		{"a reference unqualified in its own context", with(func(s *sr.Schema) { s.References[0].Subject = "b" }), true},
		{"another text", with(func(s *sr.Schema) { s.Schema = `{"type":"record","name":"Z","fields":[]}` }), false},
		{"another type", with(func(s *sr.Schema) { s.Type = sr.TypeJSON }), false},
		{"another referenced version", with(func(s *sr.Schema) { s.References[1].Version = 3 }), false},
		{"a reference into another context", with(func(s *sr.Schema) { s.References[0].Subject = ":.west:b" }), false},
		{"a reference fewer", with(func(s *sr.Schema) { s.References = s.References[:1] }), false},
	} {
		if got := sameSchema(base, c.b, ".east"); got != c.want {
			t.Errorf("%s: sameSchema = %t, want %t", c.name, got, c.want)
		}
	}
	proto := sr.Schema{Type: sr.TypeProtobuf, Schema: "syntax = \"proto3\";\nmessage A {}"}
	spaced := proto
	spaced.Schema = "syntax = \"proto3\";  message A {}"
	if sameSchema(proto, spaced, "") {
		t.Error("Protobuf texts that differ compared equal: they are compared as written")
	}
}
