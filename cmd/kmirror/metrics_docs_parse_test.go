package main

import (
	"context"
	"testing"
	"time"
)

// TestMonitoringExamplesParse parses docs/alerts.yml and
// docs/grafana-dashboard.json with real parsers from npm
// (openapi/sdk-test/check-monitoring.mjs): the yaml package for the rule
// file, with its structure checked against Prometheus's rule format, and
// Prometheus's own PromQL grammar (@prometheus-io/lezer-promql) for every
// rule expression, dashboard query and query variable; any parse error
// fails. TestMetricsLint checks the same files against a real scrape.
//
// Like TestTypeScriptSDK it needs node and `npm ci --prefix
// openapi/sdk-test`, and skips without them unless
// KMIRROR_OPENAPI_TESTS=required.
func TestMonitoringExamplesParse(t *testing.T) {
	requireNodeTools(t)
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := runNode(ctx, t, "check-monitoring.mjs", nil, "node", "check-monitoring.mjs",
		"../../docs/alerts.yml", "../../docs/grafana-dashboard.json"); err != nil {
		t.Fatal(err)
	}
}
