package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"kmirror/internal/testing/syncbuf"
	"kmirror/workers/workertest"

	"github.com/twmb/franz-go/pkg/kgo"
)

// TestDevRunsDemoAndCleansUp runs `kmirror dev` on free ports: the demo
// mirror's partitions reach MIRRORING, the banner has paste-ready lines, and
// cancelling (Ctrl-C) returns cleanly. KMIRROR_API_TOKEN protects it as it
// does a server: the demo is set up with it, and the API needs it.
func TestDevRunsDemoAndCleansUp(t *testing.T) {
	t.Setenv("KMIRROR_DATABASE_URL", "") // exercise the throw-away Postgres
	t.Setenv("KMIRROR_API_TOKEN", "dev-secret")
	t.Setenv("KMIRROR_API_READ_TOKEN", "")
	t.Setenv("KMIRROR_TOKEN", "dev-secret") // for the CLI below
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ready := make(chan string, 1)
	var out, errOut syncbuf.Buffer
	done := make(chan error, 1)
	go func() {
		done <- runDev(ctx, devConfig{Listen: "127.0.0.1:0", RecordsPerSec: 20, LogLevel: "warn",
			ready: func(base string) { ready <- base }}, &out, &errOut)
	}()
	var base string
	select {
	case base = <-ready:
	case err := <-done:
		t.Fatalf("dev exited early: %v\n%s", err, errOut.String())
	case <-time.After(60 * time.Second):
		t.Fatalf("dev did not become ready\n%s", errOut.String())
	}
	for _, want := range []string{"kmirror dev is running", base + "/docs", "kcat -b ", "The API needs a token",
		`curl -s -H "Authorization: Bearer $KMIRROR_API_TOKEN" ` + base + "/v1/mirrors/demo/topics"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("banner lacks %q:\n%s", want, out.String())
		}
	}
	// Both registries are named, and answer the curl lines the banner gives:
	// the source holds the demo's schemas.
	srcRegistry := bannerURL(t, out.String(), "Source registry")
	destRegistry := bannerURL(t, out.String(), "Destination registry")
	for _, want := range []string{"curl -s " + srcRegistry + "/subjects\n", "curl -s " + destRegistry + "/subjects\n"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("banner lacks %q:\n%s", want, out.String())
		}
	}
	if got := registrySubjects(t, srcRegistry); !slices.Equal(got, []string{"orders-value", "payments-value"}) {
		t.Errorf("source registry subjects %v, want orders-value and payments-value", got)
	}
	// The demo mirror names the source registry, and the schema sync
	// copies its subjects into the destination's.
	deadline := time.Now().Add(30 * time.Second)
	for got := registrySubjects(t, destRegistry); !slices.Equal(got, []string{"orders-value", "payments-value"}); got = registrySubjects(t, destRegistry) {
		if time.Now().After(deadline) {
			t.Fatalf("destination registry subjects %v, want orders-value and payments-value copied", got)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if strings.Contains(out.String(), "dev-secret") {
		t.Error("the banner prints the token")
	}
	if resp, err := http.Get(base + "/v1/mirrors"); err != nil || resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("GET /v1/mirrors without the token: %v %v", resp, err)
	}
	deadline = time.Now().Add(30 * time.Second)
	for {
		states := demoStates(t, base)
		mirroring := 0
		for _, s := range states {
			if s == "MIRRORING" {
				mirroring++
			}
		}
		if len(states) == 5 && mirroring == 5 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("demo partitions not all MIRRORING: %v\n%s", states, errOut.String())
		}
		time.Sleep(100 * time.Millisecond)
	}
	// The operator CLI runs a sync pass through the demo's metadata syncer.
	var syncOut, syncErr bytes.Buffer
	if code := run(ctx, []string{"mirrors", "--server", base, "--sync", "--mirror", "demo"}, &syncOut, &syncErr); code != 0 {
		t.Fatalf("--sync: exit %d: %s%s", code, syncOut.String(), syncErr.String())
	}
	for _, want := range []string{"Last sync of demo: ", "(", "request)", "  topic configs: ok\n", "  group offsets: ok\n"} {
		if !strings.Contains(syncOut.String(), want) {
			t.Errorf("--sync output lacks %q:\n%s", want, syncOut.String())
		}
	}
	// Describe says where the demo's schemas come from and how they stand.
	var descOut, descErr bytes.Buffer
	if code := run(ctx, []string{"mirrors", "--server", base, "--describe", "--mirror", "demo"}, &descOut, &descErr); code != 0 {
		t.Fatalf("--describe: exit %d: %s%s", code, descOut.String(), descErr.String())
	}
	for _, want := range []string{"Mirror demo schema registry: " + srcRegistry, "Schemas of demo: last sync ", ", ok; 2 subject(s), 3 version(s) in step",
		"  orders-value: 2 version(s), READONLY\n", "  payments-value: 1 version(s), READONLY\n"} {
		if !strings.Contains(descOut.String(), want) {
			t.Errorf("--describe output lacks %q:\n%s", want, descOut.String())
		}
	}

	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("dev returned %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("dev did not stop after cancel")
	}
	if _, err := http.Get(base + "/healthz"); err == nil {
		t.Fatal("the API still answers after dev stopped")
	}
}

func demoStates(t *testing.T, base string) []string {
	t.Helper()
	req, _ := http.NewRequest("GET", base+"/v1/partitions?mirror=demo", nil)
	req.Header.Set("Authorization", "Bearer dev-secret")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var body struct {
		Partitions []struct {
			State string `json:"state"`
		} `json:"partitions"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, p := range body.Partitions {
		out = append(out, p.State)
	}
	return out
}

// bannerURL returns the URL on the banner line that starts with label.
func bannerURL(t *testing.T, banner, label string) string {
	t.Helper()
	for _, line := range strings.Split(banner, "\n") {
		if rest, ok := strings.CutPrefix(strings.TrimSpace(line), label+" "); ok {
			if f := strings.Fields(rest); len(f) > 0 && strings.HasPrefix(f[0], "http://127.0.0.1:") {
				return f[0]
			}
		}
	}
	t.Fatalf("banner has no %q line with a URL:\n%s", label, banner)
	return ""
}

// registrySubjects lists a Schema Registry's subjects, sorted.
func registrySubjects(t *testing.T, registry string) []string {
	t.Helper()
	resp, err := http.Get(registry + "/subjects")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var subjects []string
	if err := json.NewDecoder(resp.Body).Decode(&subjects); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s/subjects: %s, %v", registry, resp.Status, err)
	}
	slices.Sort(subjects)
	return subjects
}

// TestDevQuietWithoutDemoMirror: --rate 0 writes nothing, --no-demo-mirror
// leaves every source topic free, and the source creates a topic on its
// first write, so the DR runbook's commands run against kmirror dev.
func TestDevQuietWithoutDemoMirror(t *testing.T) {
	t.Setenv("KMIRROR_DATABASE_URL", "") // exercise the throw-away Postgres
	t.Setenv("KMIRROR_API_TOKEN", "")
	t.Setenv("KMIRROR_API_READ_TOKEN", "")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ready := make(chan string, 1)
	var out, errOut syncbuf.Buffer
	done := make(chan error, 1)
	go func() {
		done <- runDev(ctx, devConfig{Listen: "127.0.0.1:0", RecordsPerSec: 0, NoDemoMirror: true, LogLevel: "warn",
			ready: func(base string) { ready <- base }}, &out, &errOut)
	}()
	var base string
	select {
	case base = <-ready:
	case err := <-done:
		t.Fatalf("dev exited early: %v\n%s", err, errOut.String())
	case <-time.After(60 * time.Second):
		t.Fatalf("dev did not become ready\n%s", errOut.String())
	}
	for _, want := range []string{"no traffic: --rate 0", "No mirror yet (--no-demo-mirror)", `"name":"from-a"`} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("banner lacks %q:\n%s", want, out.String())
		}
	}
	resp, err := http.Get(base + "/v1/mirrors")
	if err != nil {
		t.Fatal(err)
	}
	var list struct{ Mirrors []json.RawMessage }
	if err := json.NewDecoder(resp.Body).Decode(&list); err != nil || len(list.Mirrors) != 0 {
		t.Fatalf("mirrors %s (%v), want none", list.Mirrors, err)
	}
	resp.Body.Close()
	source := bannerAddr(t, out.String(), "Source Kafka")
	conn := workertest.Plain(source)
	// A record to a topic nobody made: the source makes it.
	cl, err := kgo.NewClient(kgo.SeedBrokers(source), kgo.AllowAutoTopicCreation())
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	pctx, pcancel := context.WithTimeout(ctx, 10*time.Second)
	defer pcancel()
	if err := cl.ProduceSync(pctx, &kgo.Record{Topic: "accounts", Value: []byte("a")}).FirstErr(); err != nil {
		t.Fatalf("writing to a new topic on the dev source: %v", err)
	}
	// Nothing else writes: the demo topics stay empty.
	workertest.HoldsFor(t, time.Second, "no demo traffic", func() (bool, string) {
		ends := workertest.EndOffsets(t, conn, "orders")
		total := int64(0)
		for _, e := range ends {
			total += e
		}
		return total == 0, fmt.Sprintf("orders ends %v", ends)
	})
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("dev returned %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("dev did not stop after cancel")
	}
}

// bannerAddr returns the host:port a banner line names after label.
func bannerAddr(t *testing.T, banner, label string) string {
	t.Helper()
	for _, line := range strings.Split(banner, "\n") {
		if rest, ok := strings.CutPrefix(strings.TrimSpace(line), label+" "); ok {
			if f := strings.Fields(rest); len(f) > 0 {
				return f[0]
			}
		}
	}
	t.Fatalf("banner has no %q line:\n%s", label, banner)
	return ""
}
