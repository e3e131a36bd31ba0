// Package helmcheck is .ci/run's check of the Helm chart in
// deploy/helm/kmirror, as a Go test: it renders the chart with Helm as a
// library (client-side, as `helm template` does, no cluster), decodes every
// object strictly into its Kubernetes or Prometheus-operator Go type, and
// checks what the chart promises against kmirror's own sources (the routes
// the probes use, the environment variables the server reads, the image's
// user, the shutdown budget, docs/alerts.yml).
//
// It is a module of its own so that Helm's dependencies stay out of
// kmirror's go.mod.
//
//	cd .ci/helmcheck && go test -count=1 ./...
package helmcheck
