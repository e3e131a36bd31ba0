package main

import (
	"bytes"
	"log/slog"
	"regexp"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sr"

	"kmirror/internal/devenv/devcluster"
	"kmirror/internal/devenv/devregistry"
	"kmirror/internal/kafka/kafkaconn"
	"kmirror/internal/kafka/schemaregistry"
)

// TestMirrorsCheck: --check against a full server whose destination
// principal may not write the topic to mirror prints every check, the
// failed one with what to grant, and exits 1, and --add is refused with
// that row unless --skip-checks; with the topic's WRITE granted on another
// server the check passes, exits 0, and the add goes through.
func TestMirrorsCheck(t *testing.T) {
	t.Parallel()
	for _, write := range []bool{false, true} {
		acls := []kfake.ACL{
			{Resource: kmsg.ACLResourceTypeCluster, Name: "kafka-cluster", Operation: kmsg.ACLOperationAll, Allow: true},
			{Resource: kmsg.ACLResourceTypeTopic, Name: "__mirror_state", Operation: kmsg.ACLOperationAll, Allow: true},
			{Resource: kmsg.ACLResourceTypeGroup, Name: "*", Operation: kmsg.ACLOperationAll, Allow: true},
			{Resource: kmsg.ACLResourceTypeTopic, Name: "bench", Operation: kmsg.ACLOperationDescribe, Allow: true},
		}
		if write {
			acls = append(acls, kfake.ACL{Resource: kmsg.ACLResourceTypeTopic, Name: "bench",
				Operation: kmsg.ACLOperationAll, Allow: true})
		}
		for i := range acls {
			acls[i].Pattern = kmsg.ACLResourcePatternTypeLiteral
		}
		clusters, err := devcluster.Start(devcluster.Config{
			SourceOpts: []kfake.Opt{kfake.NumBrokers(1), kfake.SeedTopics(3, "bench")},
			DestinationOpts: []kfake.Opt{kfake.NumBrokers(1), kfake.EnableSASL(), kfake.EnableACLs(),
				kfake.Superuser("PLAIN", "admin", "admin-secret"), kfake.User("PLAIN", "kmirror", "secret", acls...)},
		})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(clusters.Close)
		s := startServerOn(t, slog.New(slog.DiscardHandler), clusters, func(c *serverConfig) {
			c.Destination = kafkaconn.Config{BootstrapServers: []string{clusters.DestinationAddr()},
				Security: kafkaconn.Security{Protocol: "SASL_PLAINTEXT", SASLMechanism: "PLAIN",
					SASLUsername: "kmirror", SASLPassword: "secret"}}
		})
		cli := func(args ...string) (int, string, string) {
			var out, errOut bytes.Buffer
			code := run(t.Context(), append([]string{"mirrors", "--server", s.base}, args...), &out, &errOut)
			return code, out.String(), errOut.String()
		}
		if code, _, errOut := cli("--create", "--mirror", "m", "--source-bootstrap", clusters.SourceAddr()); code != 0 {
			t.Fatalf("create: exit %d: %s", code, errOut)
		}
		code, out, errOut := cli("--check", "--mirror", "m", "--topic", "bench")
		t.Logf("WRITE on bench %v: exit %d\n%s%s", write, code, out, errOut)
		for _, want := range []string{"Checks of mirror m, topics [bench]:", "source       read topics",
			"destination  create topics"} {
			if !strings.Contains(out, want) {
				t.Errorf("stdout lacks %q", want)
			}
		}
		switch {
		case !write && (code != 1 || !strings.Contains(out, "destination  write topics") ||
			!strings.Contains(out, "  destination write topics: WRITE on topic bench") || !strings.Contains(out, "Result: FAIL") ||
			!strings.Contains(errOut, "failed its checks")):
			t.Fatalf("without WRITE: exit %d", code)
		// kmirror's own topics warn: this test's kmirror is no super user,
		// so no one may deny the others writing them.
		case write && (code != 0 || !strings.Contains(out, "Result: WARN") ||
			!regexp.MustCompile(`destination  kmirror's own topics +WARN`).MatchString(out)):
			t.Fatalf("with WRITE: exit %d", code)
		}

		// An add runs the checks that matter for it: without WRITE it is
		// refused with the failed row, and nothing is added, unless asked
		// to skip them.
		code, out, errOut = cli("--add", "--mirror", "m", "--topic", "bench")
		if !write {
			if code != 1 || !strings.Contains(errOut, "destination write topics: not allowed on bench (grant WRITE on topic bench)") {
				t.Fatalf("add without WRITE: exit %d, stdout %q, stderr %q", code, out, errOut)
			}
			if code, out, _ := cli("--describe", "--mirror", "m"); code != 0 || strings.Contains(out, "bench") {
				t.Fatalf("a refused add added: %s", out)
			}
			code, out, errOut = cli("--add", "--mirror", "m", "--topic", "bench", "--skip-checks")
		}
		if code != 0 || !strings.Contains(out, "Added 1 topic(s) to mirror m: [bench]") {
			t.Fatalf("add (WRITE %v): exit %d, stdout %q, stderr %q", write, code, out, errOut)
		}
	}
}

// TestMirrorsCheckRegistries: on a server started with a destination
// Schema Registry, --check of a mirror that names a source registry prints
// the registries' rows with the rest (the server hands its destination
// registry to the check); a mirror on a registry that is down fails its
// check, saying what to change.
func TestMirrorsCheckRegistries(t *testing.T) {
	t.Parallel()
	clusters, err := devcluster.Start(devcluster.Config{
		SourceOpts:      []kfake.Opt{kfake.NumBrokers(1), kfake.SeedTopics(1, "bench")},
		DestinationOpts: []kfake.Opt{kfake.NumBrokers(1)},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(clusters.Close)
	registry := func() *devregistry.Registry {
		r, err := devregistry.New()
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(r.Close)
		return r
	}
	source, destination := registry(), registry()
	if _, _, err := source.Context("").RegisterSchema("bench-value", sr.Schema{Schema: `"string"`}); err != nil {
		t.Fatal(err)
	}
	s := startServerOn(t, slog.New(slog.DiscardHandler), clusters, func(c *serverConfig) {
		c.DestinationRegistry = &schemaregistry.Config{URLs: []string{destination.URL()}}
	})
	cli := func(args ...string) (int, string, string) {
		var out, errOut bytes.Buffer
		code := run(t.Context(), append([]string{"mirrors", "--server", s.base}, args...), &out, &errOut)
		return code, out.String(), errOut.String()
	}
	if code, _, errOut := cli("--create", "--mirror", "m", "--source-bootstrap", clusters.SourceAddr(),
		"--schema-registry-url", source.URL()); code != 0 {
		t.Fatalf("create: exit %d: %s", code, errOut)
	}
	code, out, errOut := cli("--check", "--mirror", "m", "--topic", "bench")
	t.Logf("exit %d\n%s%s", code, out, errOut)
	for _, re := range []string{`source registry +read subjects +PASS +1 subject\(s\) listed .*bench-value`,
		`destination registry +read modes +PASS`, `destination registry +import mode +PASS +IMPORT mode set and removed`} {
		if !regexp.MustCompile(re).MatchString(out) {
			t.Errorf("stdout lacks %s", re)
		}
	}

	source.SetDown(true)
	code, out, errOut = cli("--check", "--mirror", "m", "--topic", "bench")
	if code != 1 || !regexp.MustCompile(`source registry +read subjects +FAIL +cannot reach the Schema Registry`).MatchString(out) ||
		!strings.Contains(out, "  source registry read subjects: check the URLs and TLS settings in the mirror's source.schema_registry") {
		t.Fatalf("a source registry down: exit %d\n%s%s", code, out, errOut)
	}
}
