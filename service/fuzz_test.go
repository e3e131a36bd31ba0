package service

import (
	"encoding/json"
	"regexp/syntax"
	"strings"
	"testing"
	"time"
)

// The fuzz targets of the service's input paths. Their seeds run with
// every `go test`; `go test -fuzz=FuzzX ./service` explores further (see
// docs/fuzzing.md for how long each ran and what it found).

// FuzzValidateConfig: any config map is accepted or refused with a field
// error for each bad key, never a panic; an accepted one is accepted again
// and its effective config compiles (topic patterns included).
func FuzzValidateConfig(f *testing.F) {
	for _, s := range [][2]string{
		{"mirror.metadata.refresh.interval.ms", "30000"}, {"mirror.metadata.refresh.interval.ms", "-1"},
		{"topics.include", "orders|pay.*"}, {"topics.exclude", "(("}, {"groups.include", ".*"},
		{"topic.properties.exclude", "retention.ms,cleanup.policy"}, {"acls.include", "true"},
		{"unknown.key", "x"}, {"", ""}, {"topics.include", strings.Repeat("(a|b)*", 200)},
	} {
		f.Add(s[0], s[1])
	}
	f.Fuzz(func(t *testing.T, key, value string) {
		cfg := map[string]string{key: value}
		var v validation
		validateConfig(&v, cfg)
		if err := v.err(); err != nil {
			for _, fe := range v.fields {
				if !strings.HasPrefix(fe.Field, "config.") || fe.Message == "" {
					t.Fatalf("field error %+v", fe)
				}
			}
			return
		}
		var again validation
		validateConfig(&again, cfg)
		if again.err() != nil {
			t.Fatalf("accepted once, refused then: %v", again.err())
		}
		for _, k := range []string{"topics.include", "topics.exclude", "groups.include", "groups.exclude"} {
			if k == key && value != "" { // empty: the pattern is unset
				if _, err := CompilePattern(value); err != nil {
					t.Fatalf("accepted %s %q does not compile: %v", k, value, err)
				}
			}
		}
	})
}

// FuzzTopicPattern: any pattern compiles or is refused with a message;
// a compiled one matches whole names only, within its size bounds, and the
// matcher always answers.
func FuzzTopicPattern(f *testing.F) {
	for _, s := range [][2]string{
		{"orders", "orders"}, {"orders|payments", "payments"}, {"ord", "orders"}, {".*", "x"},
		{"(.*){1000}", "aaaa"}, {"((a{100}){100})", "a"}, {"[", "x"}, {"", "x"}, {`\Q.*\E`, ".*"},
		{strings.Repeat("[a-z]{1,1000}", 11), "abc"}, {"(?i)ORDERS", "orders"}, {"a\x00b", "a\x00b"},
	} {
		f.Add(s[0], s[1])
	}
	f.Fuzz(func(t *testing.T, pattern, name string) {
		if len(name) > 249 {
			name = name[:249] // Kafka's longest topic name: matching is linear in it
		}
		re, err := CompilePattern(pattern)
		if err != nil {
			if err.Error() == "" {
				t.Fatal("an error without a message")
			}
			return
		}
		if len(pattern) > maxPatternBytes {
			t.Fatalf("a pattern of %d bytes compiled", len(pattern))
		}
		m := newPatternMatcher(re, pattern)
		m.deadline = time.Now().Add(time.Minute) // one name: the budget is not what is tested
		ok, err := m.match(name)
		if err != nil {
			t.Fatal(err)
		}
		// Whole-name match: a match of name is a match of the pattern
		// anchored at both ends, which a longer name cannot share.
		if ok && re.FindStringIndex(name) == nil {
			t.Fatalf("%q matched %q but Find does not", pattern, name)
		}
		if loc := re.FindStringIndex(name); loc != nil && (loc[0] != 0 || loc[1] != len(name)) {
			t.Fatalf("%q matched part of %q: %v", pattern, name, loc)
		}
	})
}

// FuzzDecodeState: any __mirror_state key and value decode or are refused
// with an error naming the key, never a panic; what decodes encodes again.
func FuzzDecodeState(f *testing.F) {
	seeds := []struct{ key, value string }{
		{"mirror/m1", `{"version":1,"name":"m1","source":{"bootstrap_servers":"h:1","security_protocol":"PLAINTEXT","sasl_password_set":true},"config":{"topics.include":"x"}}`},
		{"topic/m1/orders", `{"version":1,"mirror":"m1","topic":"orders","desired_state":"mirroring","replication_factor":-1,"partitions":3}`},
		{"partition/m1/orders/0", `{"version":1,"mirror":"m1","topic":"orders","partition":0,"state":"MIRRORING","src_next":10,"dst_next":10}`},
		{"partition/m1/orders/1", `{"state":"NOT-A-STATE"}`},
		{"offsets/m1/orders/0/0", `{"version":1,"mirror":"m1","topic":"orders","partition":0,"runs":[[0,0,10]]}`},
		{"mirror/m1", `{"version":"one"}`}, {"other/x", `{}`}, {"topic/m1/t", `null`}, {"mirror/m", `[`},
	}
	for _, s := range seeds {
		f.Add(s.key, []byte(s.value))
	}
	f.Fuzz(func(t *testing.T, key string, value []byte) {
		snap, err := DecodeState(map[string][]byte{key: value})
		if err != nil {
			if !strings.Contains(err.Error(), key) && !strings.Contains(err.Error(), "unknown key") {
				t.Fatalf("error %q does not name key %q", err, key)
			}
			return
		}
		for _, v := range []any{snap.Mirrors, snap.Topics, snap.Partitions, snap.SyncedACLs} {
			if _, err := json.Marshal(v); err != nil {
				t.Fatalf("decoded %+v does not encode: %v", v, err)
			}
		}
	})
}

// TestPatternSizeIsEstimatedBeforeCompiling: a pattern whose compiled
// program would be huge is refused from its parse tree, without compiling
// it (which takes seconds), and the estimate never undercounts.
func TestPatternSizeIsEstimatedBeforeCompiling(t *testing.T) {
	start := time.Now()
	_, err := CompilePattern(strings.Repeat(`(?:ab|cd|ef){1000}`, 400))
	if err == nil || !strings.Contains(err.Error(), "instructions") {
		t.Fatalf("err %v", err)
	}
	if d := time.Since(start); d > time.Second {
		t.Errorf("refused after %s: it was compiled", d)
	}
	for _, p := range []string{"orders", "a|b|c", "(a*)*", "[a-z]{1,1000}", "(?:x{10}){10}", `\d+-\w?`, "(?i)abc", "a{2,}"} {
		re, err := syntax.Parse(p, syntax.Perl)
		if err != nil {
			t.Fatal(err)
		}
		prog, err := syntax.Compile(re.Simplify())
		if err != nil {
			t.Fatal(err)
		}
		if est := progSize(re); est < len(prog.Inst)-2 {
			t.Errorf("%q: estimated %d, compiles to %d", p, est, len(prog.Inst))
		}
	}
}
