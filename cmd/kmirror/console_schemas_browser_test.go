package main

import (
	"context"
	"crypto/rand"
	"testing"
	"time"

	"kmirror/api"
	"kmirror/internal/devenv/devcluster"
	"kmirror/internal/kafka/kafkaconn"
	"kmirror/internal/kafka/schemaregistry"
	"kmirror/internal/runtime/secretbox"
	"kmirror/internal/testing/testdb"
)

// TestConsoleSchemasBrowser runs web/e2e/console_schemas.test.mjs: the new
// mirror form sends a source Schema Registry, and the mirror's page shows
// its Schema Registry sync (issue 47): the registry, the last pass and its
// last success, and each subject copied into the destination registry,
// READONLY while its topic is mirrored and READWRITE once it is removed; a
// pass that fails shows its error in full. Its server is started as
// TestConsoleInBrowser's is, with kmirror dev's two in-memory registries:
// the source one holds the demo schemas (orders-value in two versions,
// payments-value), the other is the deployment's destination registry.
//
// It needs what TestConsoleInBrowser needs and skips or fails without
// them the same way. KMIRROR_SCREENSHOTS keeps its screenshots too
// (schemas-*.png).
func TestConsoleSchemasBrowser(t *testing.T) {
	needBrowser(t)
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	dbURL := testdb.New(t)
	clusters, err := devcluster.Start(devcluster.Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(clusters.Close)
	if err := clusters.StartDemo(ctx, devcluster.Demo{RecordsPerSecond: 5,
		Topics: map[string]int32{"orders": 2, "payments": 1}}); err != nil {
		t.Fatal(err)
	}
	registries, err := startDevRegistries(0, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(registries.Close)
	// A key of its own, so the registry's basic auth password is stored.
	key := make([]byte, secretbox.KeySize)
	if _, err := rand.Read(key); err != nil {
		t.Fatal(err)
	}
	box, err := secretbox.New(key)
	if err != nil {
		t.Fatal(err)
	}
	secrets, err := secretbox.NewKeyring(box)
	if err != nil {
		t.Fatal(err)
	}
	tokens := api.Tokens{Admin: "schemas-admin-token"}
	addr := startConsoleServer(ctx, t, serverConfig{
		Listen: "127.0.0.1:0", DatabaseURL: dbURL, InstanceID: "browser-schemas",
		Destination:         kafkaconn.Config{BootstrapServers: []string{clusters.DestinationAddr()}},
		DestinationRegistry: &schemaregistry.Config{URLs: []string{registries.destination.URL()}},
		LeaseTTL:            15 * time.Second,
		LeaseRenewInterval:  5 * time.Second,
		SourceTimeout:       5 * time.Second,
		HistoryInterval:     time.Second,
		Tokens:              tokens,
		Secrets:             secrets,
	})

	runConsoleFile(ctx, t, "console_schemas.test.mjs", 4*time.Minute, nil,
		"KMIRROR_URL=http://"+addr,
		"KMIRROR_ADMIN_TOKEN="+tokens.Admin,
		"KMIRROR_SOURCE="+clusters.SourceAddr(),
		"KMIRROR_SOURCE_REGISTRY="+registries.source.URL(),
		"KMIRROR_DESTINATION_REGISTRY="+registries.destination.URL(),
	)
}
