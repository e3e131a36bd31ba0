package preflight

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/sr"

	"kmirror/internal/kafka/schemaregistry"
)

// The clusters of the Schema Registry rows.
const (
	SourceRegistry      = "source registry"
	DestinationRegistry = "destination registry"
)

// ProbeSubjectPrefix starts the name of the subject the destination
// registry's IMPORT check sets a mode on: a subject no one registers, so
// setting and removing its mode touches nothing the registry serves.
const ProbeSubjectPrefix = "_kmirror-preflight-"

// maxRegistryMessage bounds how much of a registry's error message a row
// quotes.
const maxRegistryMessage = 200

// Where each registry's settings are given, for the grants.
const (
	sourceSettings      = "the mirror's source.schema_registry"
	destinationSettings = "the server's --destination-schema-registry-url and KMIRROR_DESTINATION_SCHEMA_REGISTRY_*"
)

// CheckSourceRegistry checks a mirror's source Schema Registry with the
// mirror's credentials: that they may list its subjects (the schema sync
// reads every version of the subjects it copies), and how many subjects
// the topics have there (TopicNameStrategy: <topic>-key and <topic>-value)
// besides those subjectRegex (the mirror's schema.subjects.include, a
// whole-name RE2 pattern; "" none) selects. Its requests are bounded by
// cfg.RequestTimeout (schemaregistry.DefaultRequestTimeout when zero).
func CheckSourceRegistry(ctx context.Context, cfg schemaregistry.Config, topics []string, subjectRegex string) []Result {
	const c, check = SourceRegistry, "read subjects"
	cl, timeout, err := registryClient(cfg)
	if err != nil {
		return []Result{{Cluster: c, Check: check, Status: Fail, Detail: err.Error(), Grant: "fix " + sourceSettings}}
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	subjects, err := cl.Subjects(ctx)
	if err != nil {
		f := registryFailure(ctx, c, check, cfg, timeout, err, sourceSettings)
		if f.forbidden {
			f.Grant = "read access to the registry's subjects for " + principal(cfg) + ", or other credentials in " + sourceSettings
		}
		return []Result{f.Result}
	}
	have := make(map[string]bool, len(subjects))
	for _, s := range subjects {
		have[s] = true
	}
	var ofTopics []string
	for _, t := range topics {
		for _, s := range []string{t + "-key", t + "-value"} {
			if have[s] {
				ofTopics = append(ofTopics, s)
			}
		}
	}
	detail := fmt.Sprintf("%d subject(s) listed to %s; ", len(subjects), principal(cfg))
	if len(ofTopics) == 0 {
		detail += "none is a checked topic's (<topic>-key, <topic>-value): no schema is copied for these topics"
	} else {
		detail += fmt.Sprintf("the checked topics have %d of them, to be copied: %s", len(ofTopics), names(ofTopics))
	}
	if re, err := regexp.Compile(`^(?:` + subjectRegex + `)$`); subjectRegex != "" && err == nil {
		var more []string
		for _, s := range subjects {
			if re.MatchString(s) && !slices.Contains(ofTopics, s) {
				more = append(more, s)
			}
		}
		detail += fmt.Sprintf("; schema.subjects.include selects %d more", len(more))
		if len(more) > 0 {
			detail += ": " + names(more)
		}
	}
	return []Result{pass(c, check, detail)}
}

// CheckDestinationRegistry checks the deployment's destination Schema
// Registry with the server's credentials: that they may read a subject's
// mode, and that the registry takes IMPORT mode from them, which the
// schema sync writes in so that every schema keeps its source id. IMPORT is
// set on a probe subject that holds nothing (ProbeSubjectPrefix and a
// random suffix, in regContext when the mirror writes into a registry
// context such as ".east"), then the subject's mode is deleted, so nothing
// is left behind: a mode that could not be deleted is a warn row naming the
// subject. Its requests are bounded by cfg.RequestTimeout
// (schemaregistry.DefaultRequestTimeout when zero).
func CheckDestinationRegistry(ctx context.Context, cfg schemaregistry.Config, regContext string) []Result {
	const c = DestinationRegistry
	cl, timeout, err := registryClient(cfg)
	if err != nil {
		return []Result{{Cluster: c, Check: "read modes", Status: Fail, Detail: err.Error(), Grant: "fix " + destinationSettings}}
	}
	probe := probeSubject(regContext)
	base := ctx
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()

	// The sync reads each subject's mode, the global one when it has none.
	read := cl.Mode(sr.WithParams(ctx, sr.DefaultToGlobal), probe)[0]
	mode := fmt.Sprintf("%s (the registry's global mode)", read.Mode)
	if isRegistryCode(read.Err, sr.ErrSubjectNotFound) || isRegistryCode(read.Err, sr.ErrSubjectLevelModeNotConfigured) {
		// A registry that does not fall back to the global mode: it
		// answered, and says the subject has no mode of its own.
		read.Err, mode = nil, "none of its own"
	}
	if read.Err != nil {
		f := registryFailure(ctx, c, "read modes", cfg, timeout, read.Err, destinationSettings)
		if f.forbidden {
			f.Grant = "read access to the registry's subjects and modes for " + principal(cfg) + ", or other credentials in " + destinationSettings
		}
		return []Result{f.Result}
	}
	rows := []Result{pass(c, "read modes", fmt.Sprintf("%s reads a new subject's mode: %s", principal(cfg), mode))}

	const check = "import mode"
	set := cl.SetMode(ctx, sr.ModeImport, probe)[0].Err
	// A request that timed out, lost its connection or failed in the
	// registry (a 5xx: its write may land later) may have been applied:
	// the mode is deleted whatever the answer, but after a refusal (a
	// 4xx), which set nothing.
	var refused *sr.ResponseError
	if errors.As(set, &refused) && refused.StatusCode >= 500 {
		refused = nil
	}
	var cleanup []Result
	if refused == nil {
		cleanup = resetProbe(base, cl, timeout, probe)
	}
	const why = "the schema sync writes each schema with its source id, which takes IMPORT mode on the subjects it copies"
	switch {
	case set == nil:
		rows = append(rows, pass(c, check, fmt.Sprintf(
			"IMPORT mode set and removed on the probe subject %s: schemas can be copied with their source ids", probe)))
	case refused != nil && refused.ErrorCode == sr.ErrOperationNotPermitted.Code:
		rows = append(rows, Result{Cluster: c, Check: check, Status: Fail,
			Detail: fmt.Sprintf("the registry does not allow mode changes (%s); %s", registryMessage(refused), why),
			Grant:  "allow mode changes on the destination registry (Confluent Schema Registry: mode.mutability=true, then restart it)"})
	case refused != nil && refused.StatusCode == http.StatusForbidden:
		rows = append(rows, Result{Cluster: c, Check: check, Status: Fail,
			Detail: fmt.Sprintf("the registry refused %s setting IMPORT mode on a subject (HTTP 403); %s", principal(cfg), why),
			Grant: "the right to change subject modes for " + principal(cfg) + " (and mode changes allowed: " +
				"mode.mutability=true on Confluent Schema Registry)"})
	case refused != nil && refused.StatusCode != http.StatusUnauthorized && refused.ErrorCode != 0:
		rows = append(rows, Result{Cluster: c, Check: check, Status: Fail,
			Detail: fmt.Sprintf("the registry refused IMPORT mode on the probe subject %s (%s); %s", probe, registryMessage(refused), why),
			Grant:  "a destination registry that takes IMPORT mode (Confluent Schema Registry: mode.mutability=true)"})
	default:
		rows = append(rows, registryFailure(ctx, c, check, cfg, timeout, set, destinationSettings).Result)
	}
	return append(rows, cleanup...)
}

// resetProbe deletes the probe subject's mode, with a time of its own so
// that a check that ran out of time, or whose caller left, still cleans
// up. A subject that has no mode (the set was never applied) is fine.
func resetProbe(ctx context.Context, cl *sr.Client, timeout time.Duration, probe string) []Result {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), timeout)
	defer cancel()
	err := cl.ResetMode(ctx, probe)[0].Err
	if err == nil || isRegistryCode(err, sr.ErrSubjectNotFound) || isRegistryCode(err, sr.ErrSubjectLevelModeNotConfigured) {
		return nil
	}
	slog.WarnContext(ctx, "preflight: the destination registry's probe subject keeps its mode", "subject", probe, "err", err)
	return []Result{{Cluster: DestinationRegistry, Check: "remove the probe's mode", Status: Warn,
		Detail: fmt.Sprintf("the probe subject %s may keep IMPORT mode: deleting its mode failed (%s)", probe, publicRegistryError(err)),
		Grant:  fmt.Sprintf("delete it on the registry: DELETE /mode/%s", probe)}}
}

// registryClient makes a client for cfg and says how long its checks may
// take.
func registryClient(cfg schemaregistry.Config) (*sr.Client, time.Duration, error) {
	timeout := cmp.Or(cfg.RequestTimeout, schemaregistry.DefaultRequestTimeout)
	cfg.RequestTimeout = timeout
	cl, err := schemaregistry.NewClient(cfg)
	return cl, timeout, err
}

// probeSubject names a probe subject no one else uses, qualified with the
// registry context when there is one.
func probeSubject(regContext string) string {
	b := make([]byte, 8)
	_, _ = rand.Read(b) // crypto/rand's Read never fails
	name := ProbeSubjectPrefix + hex.EncodeToString(b)
	if regContext != "" && regContext != "." {
		name = ":" + regContext + ":" + name
	}
	return name
}

// failure is a registry row that did not pass; forbidden says the
// registry answered 403, for the caller to say what to grant.
type failure struct {
	Result
	forbidden bool
}

// registryFailure is the row of a request the registry did not answer
// with what was asked. A registry that could not be spoken to reads the
// same whatever is at its address, as a Kafka broker does
// (kafkaconn.Public): a closed port, a host that never answers, a TLS
// failure and a web server that is no registry all read "cannot reach";
// the server log says which. Refusals of the credentials (401, 403) and
// the registry's own errors are shown.
func registryFailure(ctx context.Context, cluster, check string, cfg schemaregistry.Config, timeout time.Duration,
	err error, settings string) failure {
	var re *sr.ResponseError
	switch {
	case errors.As(err, &re) && re.StatusCode == http.StatusUnauthorized:
		detail := "the registry refused " + principal(cfg) + " (HTTP 401)"
		if cfg.Username == "" && cfg.BearerToken == "" {
			detail = "the registry asks for credentials, and none are set (HTTP 401)"
		}
		return failure{Result: Result{Cluster: cluster, Check: check, Status: Fail, Detail: detail,
			Grant: "check the credentials in " + settings + " (basic auth user and password, or a bearer token)"}}
	case errors.As(err, &re) && re.StatusCode == http.StatusForbidden:
		return failure{Result: Result{Cluster: cluster, Check: check, Status: Fail,
			Detail: "the registry denied " + principal(cfg) + " (HTTP 403): the credentials are wrong or lack the right",
			Grant:  "check the credentials in " + settings + " and what they may do on the registry"}, forbidden: true}
	case re != nil && re.ErrorCode != 0:
		return failure{Result: Result{Cluster: cluster, Check: check, Status: Fail,
			Detail: "the registry answered with an error: " + registryMessage(re),
			Grant:  "check the registry's health and " + settings}}
	}
	slog.WarnContext(ctx, "preflight: cannot reach schema registry", "cluster", cluster, "urls", strings.Join(cfg.URLs, ","), "err", err)
	return failure{Result: Result{Cluster: cluster, Check: check, Status: Fail,
		Detail: fmt.Sprintf("cannot reach the Schema Registry at %s within %s", strings.Join(cfg.URLs, ","), timeout),
		Grant:  "check the URLs and TLS settings in " + settings + " and that this server can reach them (the server log says why it could not)"}}
}

// publicRegistryError is err, from a registry that answered the requests
// before it, as a row shows it: the registry's answer, or "cannot reach"
// (the log says why).
func publicRegistryError(err error) string {
	var re *sr.ResponseError
	if errors.As(err, &re) {
		// The registry answered the requests before this one as a
		// registry: its status is its own (405 from a registry older
		// than DELETE /mode/{subject}).
		return registryMessage(re)
	}
	return "cannot reach the registry"
}

// registryMessage is a registry's error answer, its message bounded.
func registryMessage(re *sr.ResponseError) string {
	if re == nil {
		return "no answer"
	}
	msg := strings.ToValidUTF8(strings.TrimSpace(re.Message), "?")
	if len(msg) > maxRegistryMessage {
		msg = strings.ToValidUTF8(msg[:maxRegistryMessage], "") + "…"
	}
	if re.ErrorCode == 0 || msg == "" {
		return fmt.Sprintf("HTTP %d", re.StatusCode)
	}
	return fmt.Sprintf("HTTP %d, error %d: %s", re.StatusCode, re.ErrorCode, msg)
}

// isRegistryCode reports whether err is the registry's answer with want's
// code.
func isRegistryCode(err error, want *sr.Error) bool {
	var re *sr.ResponseError
	return errors.As(err, &re) && re.ErrorCode == want.Code
}

// principal names who kmirror is to a registry.
func principal(cfg schemaregistry.Config) string {
	switch {
	case cfg.Username != "":
		return "user " + cfg.Username
	case cfg.BearerToken != "":
		return "the bearer token"
	case cfg.TLSCertPEM != "":
		return "the client certificate"
	}
	return "kmirror (no credentials)"
}
