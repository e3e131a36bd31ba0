package main

import (
	"cmp"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strings"
	"time"

	"kmirror/openapi/client"
)

// mirrorsRequestTimeout bounds each API call. Creating a mirror and adding
// topics wait for the source cluster, which the server itself bounds
// (--source-timeout, 5s by default).
const mirrorsRequestTimeout = 60 * time.Second

// mirrorsCLI runs one `kmirror mirrors` action through the generated client.
type mirrorsCLI struct {
	opts   *mirrorsOptions
	server string
	api    *client.ClientWithResponses
	stdout io.Writer
	// stderr takes notes for a person that a script reading stdout must
	// not see as data (no mirrors to list).
	stderr io.Writer
	// tokenVar names the variable the API token came from ("" if none).
	tokenVar string
}

func newMirrorsCLI(opts *mirrorsOptions, stdout, stderr io.Writer) (*mirrorsCLI, error) {
	server := strings.TrimSpace(opts.server)
	if !strings.Contains(server, "://") {
		server = "http://" + server
	}
	u, err := url.Parse(server)
	if err != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https") {
		return nil, usagef("--server %q is not an http(s) URL", opts.server)
	}
	hc := &http.Client{Timeout: mirrorsRequestTimeout}
	if caFile := os.Getenv("KMIRROR_CA_FILE"); caFile != "" {
		// A server whose certificate a private CA signed (kmirror server
		// --tls-cert-file): trust that CA as well as the system's.
		pem, err := os.ReadFile(caFile)
		if err != nil {
			return nil, fmt.Errorf("KMIRROR_CA_FILE: %w", err)
		}
		roots, err := x509.SystemCertPool()
		if err != nil {
			roots = x509.NewCertPool()
		}
		if !roots.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("KMIRROR_CA_FILE %s holds no PEM certificate", caFile)
		}
		tr := http.DefaultTransport.(*http.Transport).Clone()
		tr.TLSClientConfig = &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12}
		hc.Transport = tr
	}
	token, tokenVar := cliToken()
	api, err := client.NewClientWithResponses(server,
		client.WithHTTPClient(hc),
		client.WithRequestEditorFn(func(_ context.Context, req *http.Request) error {
			req.Header.Set("User-Agent", "kmirror-cli/"+version)
			if token != "" {
				req.Header.Set("Authorization", "Bearer "+token)
			}
			return nil
		}))
	if err != nil {
		return nil, err
	}
	return &mirrorsCLI{opts: opts, server: strings.TrimSuffix(server, "/"), api: api, stdout: stdout, stderr: stderr, tokenVar: tokenVar}, nil
}

func (c *mirrorsCLI) run(ctx context.Context) error {
	switch c.opts.action {
	case "create":
		return c.create(ctx)
	case "update":
		return c.update(ctx)
	case "delete":
		return c.delete(ctx)
	case "list":
		return c.list(ctx)
	case "describe":
		return c.describe(ctx)
	case "add":
		return c.add(ctx)
	case "remove":
		if c.opts.dryRun {
			return c.previewRemove(ctx)
		}
		return c.transition(ctx)
	case "pause", "resume":
		return c.transition(ctx)
	case "sync":
		return c.sync(ctx)
	case "check":
		return c.checkMirror(ctx)
	}
	return usagef("unknown action %q", c.opts.action)
}

func (c *mirrorsCLI) create(ctx context.Context) error {
	src, err := c.opts.sourceSpec()
	if err != nil {
		return err
	}
	body := client.CreateMirrorRequest{Name: c.opts.mirror, Source: src}
	if len(c.opts.config) > 0 {
		cfg := map[string]string(c.opts.config)
		body.Config = &cfg
	}
	params := &client.CreateMirrorParams{
		DryRun:                ptrOrNil(c.opts.dryRun),
		SkipConnectivityCheck: ptrOrNil(c.opts.skipConnectivityCheck),
	}
	resp, err := c.api.CreateMirrorWithResponse(ctx, params, body)
	if err := c.check(resp, err, http.StatusCreated, http.StatusOK); err != nil {
		return err
	}
	if c.opts.dryRun {
		fmt.Fprintf(c.stdout, "Mirror %s is valid (dry run, nothing created).\n", c.opts.mirror)
	} else {
		fmt.Fprintf(c.stdout, "Created mirror %s.\n", c.opts.mirror)
	}
	return nil
}

// update changes a mirror's config keys, and prints what each is now.
func (c *mirrorsCLI) update(ctx context.Context) error {
	cfg := map[string]*string{}
	for k, v := range c.opts.config {
		cfg[k] = ptr(v)
	}
	for _, k := range c.opts.resetConfig {
		cfg[k] = nil
	}
	resp, err := c.api.UpdateMirrorWithResponse(ctx, c.opts.mirror, &client.UpdateMirrorParams{}, client.UpdateMirrorRequest{Config: &cfg})
	if err := c.check(resp, err, http.StatusOK); err != nil {
		return err
	}
	if resp.JSON200 == nil {
		return c.unexpected(resp)
	}
	fmt.Fprintf(c.stdout, "Updated mirror %s:\n", c.opts.mirror)
	for _, k := range slices.Sorted(maps.Keys(cfg)) {
		how := "set"
		if cfg[k] == nil {
			how = "default"
		}
		fmt.Fprintf(c.stdout, "  %s=%s (%s)\n", k, resp.JSON200.EffectiveConfig[k], how)
	}
	return nil
}

func (c *mirrorsCLI) delete(ctx context.Context) error {
	// A topic removed a moment ago may still be STOPPING: wait for it.
	wait := "30s"
	resp, err := c.api.DeleteMirrorWithResponse(ctx, c.opts.mirror, &client.DeleteMirrorParams{Wait: &wait})
	if err := c.check(resp, err, http.StatusNoContent); err != nil {
		return err
	}
	fmt.Fprintf(c.stdout, "Deleted mirror %s.\n", c.opts.mirror)
	return nil
}

func (c *mirrorsCLI) list(ctx context.Context) error {
	resp, err := c.api.ListMirrorsWithResponse(ctx)
	if err := c.check(resp, err, http.StatusOK); err != nil {
		return err
	}
	if resp.JSON200 == nil {
		return c.unexpected(resp)
	}
	for _, m := range resp.JSON200.Mirrors {
		fmt.Fprintln(c.stdout, m.Name)
	}
	if len(resp.JSON200.Mirrors) == 0 {
		// On stderr, as kubectl says "No resources found": a script that
		// reads the names from stdout gets none, not this line.
		fmt.Fprintf(c.stderr, "No mirrors on %s; create one with --create.\n", c.server)
	}
	return nil
}

func (c *mirrorsCLI) add(ctx context.Context) error {
	body := client.AddTopicsRequest{Topic: c.opts.topic, Recreate: ptrOrNil(c.opts.recreate),
		Continue: ptrOrNil(c.opts.continueHistory), KeepDivergent: ptrOrNil(c.opts.keepDivergent)}
	if c.opts.set["replication-factor"] {
		body.ReplicationFactor = ptr(c.opts.replicationFactor)
	}
	if c.opts.dryRun {
		return c.previewAdd(ctx, body)
	}
	resp, err := c.api.AddTopicsWithResponse(ctx, c.opts.mirror, &client.AddTopicsParams{SkipChecks: ptrOrNil(c.opts.skipChecks)}, body)
	if err := c.check(resp, err, http.StatusOK); err != nil {
		return err
	}
	if resp.JSON200 == nil {
		return c.unexpected(resp)
	}
	topics := resp.JSON200.Topics
	list := topicList(topics)
	if m := resp.JSON200.Matches; m != nil {
		list = matchList(*m)
	}
	fmt.Fprintf(c.stdout, "Added %d topic(s) to mirror %s: %s\n", len(topics), c.opts.mirror, list)
	if c.opts.set["wait"] {
		return c.waitForTopics(ctx, topics)
	}
	return nil
}

// transition pauses, resumes or removes topics; the three share a request
// and a result.
func (c *mirrorsCLI) transition(ctx context.Context) error {
	body := client.TopicsRequest{Topic: c.opts.topic}
	var (
		resp   apiResponse
		result *client.TopicsResult
		err    error
		format string
	)
	// A wait of 0s answers with each topic's destination name (and states
	// as they are) in the same request, so the line names the topics as
	// --add's does: orders → east.orders. --wait follows on its own.
	wait := ptr("0s")
	switch c.opts.action {
	case "pause":
		format = "Paused mirroring for %[1]d topic(s): %[3]s\n"
		var r *client.PauseTopicsResponse
		if r, err = c.api.PauseTopicsWithResponse(ctx, c.opts.mirror, &client.PauseTopicsParams{Wait: wait}, body); err == nil {
			resp, result = r, r.JSON200
		}
	case "resume":
		format = "Resumed mirroring for %[1]d topic(s): %[3]s\n"
		var r *client.ResumeTopicsResponse
		if r, err = c.api.ResumeTopicsWithResponse(ctx, c.opts.mirror, &client.ResumeTopicsParams{Wait: wait}, body); err == nil {
			resp, result = r, r.JSON200
		}
	case "remove":
		format = "Removed %[1]d topic(s) from mirror %[2]s: %[3]s\n"
		var r *client.RemoveTopicsResponse
		if r, err = c.api.RemoveTopicsWithResponse(ctx, c.opts.mirror, &client.RemoveTopicsParams{Wait: wait}, body); err == nil {
			resp, result = r, r.JSON200
		}
	}
	if err := c.check(resp, err, http.StatusOK); err != nil {
		return err
	}
	if result == nil {
		return c.unexpected(resp)
	}
	topics := result.Topics
	names := topicList(topics)
	if result.Wait != nil {
		dests := make([]string, len(result.Wait.Topics))
		for i, t := range result.Wait.Topics {
			dests[i] = topicName(t.Topic, t.DestinationTopic)
		}
		names = topicList(dests)
	}
	fmt.Fprintf(c.stdout, format, len(topics), c.opts.mirror, names)
	if c.opts.set["wait"] {
		return c.waitForTopics(ctx, topics)
	}
	return nil
}

// apiResponse is what every generated *XxxResponse offers.
type apiResponse interface {
	StatusCode() int
	ContentType() string
	GetBody() []byte
}

// problemError is an error the server answered with, as problem+json.
type problemError struct {
	status  int
	problem client.Problem
}

func (e *problemError) Error() string {
	return cmp.Or(e.problem.Detail, e.problem.Title, http.StatusText(e.status))
}

// check turns a transport failure or an unexpected status into an error:
// the server's problem when it sent one.
func (c *mirrorsCLI) check(resp apiResponse, err error, want ...int) error {
	if err != nil {
		return c.transportError(err)
	}
	status := resp.StatusCode()
	for _, w := range want {
		if status == w {
			return nil
		}
	}
	if strings.Contains(resp.ContentType(), "json") {
		var p client.Problem
		if json.Unmarshal(resp.GetBody(), &p) == nil && (p.Detail != "" || p.Title != "") {
			if status == http.StatusUnauthorized {
				p.Detail = cmp.Or(p.Detail, p.Title) + "; " + c.tokenHint()
			}
			return &problemError{status: status, problem: p}
		}
	}
	return c.unexpected(resp)
}

// unexpected describes a response that is not what the API promises, for
// example a proxy's error page.
func (c *mirrorsCLI) unexpected(resp apiResponse) error {
	body := strings.TrimSpace(string(resp.GetBody()))
	if len(body) > 200 {
		body = body[:200] + "..."
	}
	msg := fmt.Sprintf("unexpected answer from the kmirror server at %s: HTTP %d", c.server, resp.StatusCode())
	if ct := resp.ContentType(); ct != "" {
		msg += " (" + ct + ")"
	}
	if body != "" {
		msg += ": " + body
	}
	return errors.New(msg)
}

func (c *mirrorsCLI) transportError(err error) error {
	var urlErr *url.Error
	switch {
	case errors.Is(err, context.Canceled):
		return fmt.Errorf("interrupted before the kmirror server at %s answered", c.server)
	case errors.As(err, &urlErr) && urlErr.Timeout():
		return fmt.Errorf("the kmirror server at %s did not answer within %s", c.server, mirrorsRequestTimeout)
	case errors.As(err, &urlErr):
		return fmt.Errorf("cannot reach the kmirror server at %s: %v", c.server, urlErr.Err)
	}
	return fmt.Errorf("kmirror server at %s: %w", c.server, err)
}

// printError writes "Error: <detail>" and any per-field errors the detail
// does not already spell out.
func printError(w io.Writer, err error) {
	fmt.Fprintf(w, "Error: %v\n", err)
	var pe *problemError
	if !errors.As(err, &pe) {
		return
	}
	detail := pe.problem.Detail
	for _, f := range val(pe.problem.Errors) {
		line := f.Field + ": " + f.Message
		if !strings.Contains(detail, line) {
			fmt.Fprintf(w, "  %s\n", line)
		}
	}
}

// cliToken is the API token the CLI sends: KMIRROR_TOKEN, or else
// KMIRROR_API_TOKEN, the variable the server and kmirror dev read, so one
// shell variable serves both. It returns the variable it came from.
func cliToken() (token, from string) {
	for _, v := range []string{"KMIRROR_TOKEN", "KMIRROR_API_TOKEN"} {
		if t := os.Getenv(v); t != "" {
			return t, v
		}
	}
	return "", ""
}

// tokenHint says, for a 401, which variable the CLI took its token from,
// or which ones it reads.
func (c *mirrorsCLI) tokenHint() string {
	if c.tokenVar == "" {
		return "set KMIRROR_TOKEN (or KMIRROR_API_TOKEN) to one of the server's API tokens"
	}
	return "the server refused the token in " + c.tokenVar
}
