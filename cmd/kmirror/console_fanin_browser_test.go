package main

import (
	"context"
	"testing"
	"time"

	"kmirror/api"
	"kmirror/internal/devenv/devcluster"
	"kmirror/internal/testing/testdb"
)

// TestConsoleFanInBrowser runs web/e2e/console_fanin.test.mjs: the console
// of a mirror whose topic.name.prefix writes its topics under other names
// (fan-in, issue 30) names each topic's destination beside its source, in
// the new-mirror form, the add preview and its report, the topic list, the
// partition table, the failover dialog, the translator and a 409 conflict,
// and a mirror without a prefix still shows each name once. Its server is
// started as TestConsoleInBrowser's is, with a demo source of its own.
//
// It needs what TestConsoleInBrowser needs (node, Chromium, `npm ci` in
// web/e2e) and skips or fails without them the same way. KMIRROR_SCREENSHOTS
// keeps its screenshots too (fanin-*.png).
func TestConsoleFanInBrowser(t *testing.T) {
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
		Topics: map[string]int32{"orders": 3, "payments": 2}}); err != nil {
		t.Fatal(err)
	}
	tokens := api.Tokens{Admin: "fanin-admin-token"}
	addr := startMirroringConsoleServer(ctx, t, dbURL, "browser-fanin", clusters, tokens)

	runConsoleFile(ctx, t, "console_fanin.test.mjs", 4*time.Minute, nil,
		"KMIRROR_URL=http://"+addr,
		"KMIRROR_ADMIN_TOKEN="+tokens.Admin,
		"KMIRROR_SOURCE="+clusters.SourceAddr(),
		"KMIRROR_DESTINATION="+clusters.DestinationAddr(),
	)
}
