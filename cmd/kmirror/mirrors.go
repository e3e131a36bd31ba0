package main

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"time"

	"kmirror/openapi/client"
)

// mirrorsUsage is the help: exactly one action, then what it acts on.
const mirrorsUsage = `Usage: kmirror mirrors [--server URL] ACTION [flags]

Manages mirrors: each one copies topics from a source Kafka cluster into the
destination cluster kmirror runs against, partition by partition, keeping
the offset mapping so consumers can fail over. This command talks to the
kmirror REST API at --server (else KMIRROR_SERVER, else
http://127.0.0.1:8080), not to Kafka. Exactly one action:

  --create --mirror NAME --source-bootstrap HOST:PORT[,HOST:PORT...]
           [--security-protocol P] [--sasl-mechanism M] [--sasl-username U]
           [--sasl-password-file F] [--tls-ca-file F] [--tls-cert-file F]
           [--tls-key-file F] [--tls-server-name N] [--config KEY=VALUE ...]
           [--aws-access-key-id ID] [--aws-secret-access-key-file F]
           [--aws-session-token-file F] [--aws-region R]
           [--sasl-oauthbearer-token-endpoint-url URL]
           [--sasl-oauthbearer-client-id ID]
           [--sasl-oauthbearer-client-secret-file F]
           [--sasl-oauthbearer-scope S] [--sasl-oauthbearer-extension K=V ...]
           [--schema-registry-url URL[,URL...]]
           [--schema-registry-username U] [--schema-registry-password-file F]
           [--schema-registry-bearer-token-file F] [--schema-registry-ca-file F]
           [--schema-registry-cert-file F] [--schema-registry-key-file F]
           [--schema-registry-server-name N]
           [--dry-run] [--skip-connectivity-check]
                                   add a mirror from a source cluster
  --delete   --mirror NAME         delete a mirror (its topics must be removed)
  --list                           list the mirrors
  --describe [--mirror NAME] [--topic REGEX] [--failed] [--json]
                                   show every mirrored partition: offsets, lag, state
  --add      --mirror NAME --topic REGEX [--replication-factor N]
           [--recreate | --continue [--keep-divergent]] [--wait D | --dry-run]
           [--skip-checks]
                                   start mirroring source topics (creates them on
                                   the destination, read-only while mirrored),
                                   after the --check rows that matter pass;
                                   with --continue --dry-run, change nothing and
                                   print per partition what continuing would do
  --pause    --mirror NAME --topic REGEX [--wait D]
                                   stop copying for now; the destination stays read-only
  --resume   --mirror NAME --topic REGEX [--wait D]
                                   continue copying from where the pause left off
  --remove   --mirror NAME --topic REGEX [--wait D | --dry-run]
                                   stop mirroring for good (failover): the last
                                   offsets are saved and the destination topics
                                   become writable; with --dry-run, change
                                   nothing and print per partition what a
                                   failover now would leave behind
  --sync     --mirror NAME         copy the source's metadata now (topic configs,
                                   partition growth, consumer group offsets,
                                   ACLs) and print the result
  --check    --mirror NAME [--topic REGEX] [--replication-factor N]
                                   check what the mirror needs of its source and
                                   destination with kmirror's own credentials
                                   (the mirror's topics, or those matching
                                   --topic): one row per check, pass, warn or
                                   fail, with what to grant; exits 1 on a fail

--topic is an RE2 pattern matched against whole topic names ("orders|payments",
"orders\..*"). The source's SASL password comes from --sasl-password-file or,
with a SASL_* protocol, from KMIRROR_SOURCE_SASL_PASSWORD; never from the
command line. So do AWS_MSK_IAM's secret key and session token
(--aws-*-file, KMIRROR_SOURCE_AWS_SECRET_ACCESS_KEY and _SESSION_TOKEN, read
with --aws-access-key-id) and OAUTHBEARER's client secret
(--sasl-oauthbearer-client-secret-file,
KMIRROR_SOURCE_SASL_OAUTHBEARER_CLIENT_SECRET), and the source Schema
Registry's password or bearer token (--schema-registry-password-file or
KMIRROR_SOURCE_SCHEMA_REGISTRY_PASSWORD with --schema-registry-username;
else --schema-registry-bearer-token-file or
KMIRROR_SOURCE_SCHEMA_REGISTRY_BEARER_TOKEN).

Changes take effect in the background: each partition moves through states
(PREPARING, MIRRORING, PAUSING, PAUSED, STOPPING, STOPPED; FAILED when it
cannot go on). With --wait D (a duration such as 30s or 2m, at most 5m) the
command waits until every partition of the topics is MIRRORING (--add,
--resume), PAUSED (--pause) or STOPPED (--remove), printing a progress line
per topic as partitions get there ("orders: 2/3 partitions MIRRORING"). It
stops early when the rest are FAILED (see --describe --failed).

--describe prints one line per partition: MIRROR, TOPIC, PARTITION, the source
and destination end offsets (SOURCE-OFFSET, DESTINATION-OFFSET), LAG (records
on the source not yet mirrored) and STATE; "-" is not known yet. Partitions
with an error or with records lost to source retention get a line each below
the table. --json prints the rows as the API returns them.

When the server requires API tokens, set KMIRROR_TOKEN to one of them (or
KMIRROR_API_TOKEN, which the server and kmirror dev read, when that is unset). When
it serves HTTPS with a certificate from a private CA, set KMIRROR_CA_FILE to
that CA's PEM file.

Exit status: 0 done, 1 refused by the server or not reachable, 2 bad usage,
3 --wait ended before every partition got there (the change itself was made).

Flags:
`

// mirrorsActions are the action flags, in the order usage lists them.
var mirrorsActions = []string{"create", "update", "delete", "list", "describe", "add", "pause", "resume", "remove", "sync", "check"}

// mirrorsActionHelp says what each action does, for the flag list.
var mirrorsActionHelp = map[string]string{
	"create":   "add a mirror from a source cluster",
	"update":   "change a mirror's config: --config KEY=VALUE sets a key, --reset-config KEY returns it to its default",
	"delete":   "delete a mirror whose topics are all removed",
	"list":     "list the mirrors",
	"describe": "show each mirrored partition's offsets, lag and state",
	"add":      "start mirroring the source topics matching --topic",
	"pause":    "stop copying the topics for now (the destination stays read-only)",
	"resume":   "continue copying paused topics from where they stopped",
	"remove":   "stop mirroring the topics (failover: the destination becomes writable)",
	"sync":     "copy the source's metadata now and print the result",
	"check":    "check what the mirror needs of its source and destination (preflight)",
}

// mirrorsFlagActions lists, for each non-action flag, the actions it applies
// to; --server applies to all. A flag given with another action is a usage
// error rather than silently ignored.
var mirrorsFlagActions = map[string][]string{
	"mirror":                  {"create", "update", "delete", "describe", "add", "pause", "resume", "remove", "sync", "check"},
	"topic":                   {"describe", "add", "pause", "resume", "remove", "check"},
	"source-bootstrap":        {"create"},
	"security-protocol":       {"create"},
	"sasl-mechanism":          {"create"},
	"sasl-username":           {"create"},
	"sasl-password-file":      {"create"},
	"tls-ca-file":             {"create"},
	"tls-cert-file":           {"create"},
	"tls-key-file":            {"create"},
	"tls-server-name":         {"create"},
	"config":                  {"create", "update"},
	"reset-config":            {"update"},
	"dry-run":                 {"create", "add", "remove"},
	"skip-connectivity-check": {"create"},
	"replication-factor":      {"add", "check"},
	"skip-checks":             {"add"},
	"recreate":                {"add"},
	"continue":                {"add"},
	"keep-divergent":          {"add"},
	"failed":                  {"describe"},
	"json":                    {"describe"},
	"wait":                    {"add", "pause", "resume", "remove"},
}

// mirrorsOptions holds the parsed flags.
type mirrorsOptions struct {
	server string
	action string
	set    map[string]bool // flags given on the command line

	mirror string
	topic  string

	sourceBootstrap       string
	securityProtocol      string
	saslMechanism         string
	saslUsername          string
	saslPasswordFile      string
	tlsCAFile             string
	tlsCertFile           string
	tlsKeyFile            string
	tlsServerName         string
	sasl                  mirrorsSASLFlags
	schemaRegistry        mirrorsSchemaRegistryFlags
	config                configFlag
	resetConfig           listFlag
	dryRun                bool
	skipConnectivityCheck bool
	skipChecks            bool

	replicationFactor int
	recreate          bool
	continueHistory   bool
	keepDivergent     bool

	failed bool
	json   bool

	wait time.Duration
}

// usageError is bad command-line usage: exit status 2.
type usageError struct{ msg string }

func (e *usageError) Error() string { return e.msg }

func usagef(format string, args ...any) error {
	return &usageError{fmt.Sprintf(format, args...)}
}

// mirrorsCommand runs `kmirror mirrors` and returns the exit status.
func mirrorsCommand(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	opts, err := parseMirrorsFlags(args, stdout, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	var usage *usageError
	if errors.As(err, &usage) {
		fmt.Fprintf(stderr, "kmirror mirrors: %s\nRun 'kmirror mirrors --help' for usage.\n", usage.msg)
		return 2
	}
	cli, err := newMirrorsCLI(opts, stdout, stderr)
	if err == nil {
		err = cli.run(ctx)
	}
	if errors.As(err, &usage) {
		fmt.Fprintf(stderr, "kmirror mirrors: %s\nRun 'kmirror mirrors --help' for usage.\n", usage.msg)
		return 2
	}
	var incomplete *waitIncompleteError
	if errors.As(err, &incomplete) {
		fmt.Fprintf(stderr, "Error: %v\n", err)
		return 3
	}
	if err != nil {
		printError(stderr, err)
		return 1
	}
	return 0
}

func parseMirrorsFlags(args []string, stdout, stderr io.Writer) (*mirrorsOptions, error) {
	o := &mirrorsOptions{set: map[string]bool{}}
	fs := flag.NewFlagSet("kmirror mirrors", flag.ContinueOnError)
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), mirrorsUsage)
		fs.PrintDefaults()
	}
	actions := make(map[string]*bool, len(mirrorsActions))
	for _, a := range mirrorsActions {
		actions[a] = fs.Bool(a, false, "action: "+mirrorsActionHelp[a])
	}
	fs.StringVar(&o.server, "server", cmp.Or(os.Getenv("KMIRROR_SERVER"), "http://127.0.0.1:8080"), "kmirror REST API base URL (KMIRROR_SERVER)")
	fs.StringVar(&o.mirror, "mirror", "", "mirror name")
	fs.StringVar(&o.topic, "topic", "", "RE2 pattern matched against whole topic names")
	fs.StringVar(&o.sourceBootstrap, "source-bootstrap", "", "source cluster bootstrap servers, HOST:PORT[,HOST:PORT...]")
	fs.StringVar(&o.securityProtocol, "security-protocol", "", "source security protocol: PLAINTEXT (default), SSL, SASL_PLAINTEXT or SASL_SSL")
	fs.StringVar(&o.saslMechanism, "sasl-mechanism", "", "source SASL mechanism: PLAIN, SCRAM-SHA-256, SCRAM-SHA-512, AWS_MSK_IAM or OAUTHBEARER")
	fs.StringVar(&o.saslUsername, "sasl-username", "", "source SASL username")
	fs.StringVar(&o.saslPasswordFile, "sasl-password-file", "", "file holding the source SASL password (else KMIRROR_SOURCE_SASL_PASSWORD)")
	fs.StringVar(&o.tlsCAFile, "tls-ca-file", "", "PEM file of CA certificates that sign the source brokers' certificates")
	fs.StringVar(&o.tlsCertFile, "tls-cert-file", "", "PEM client certificate for the source")
	fs.StringVar(&o.tlsKeyFile, "tls-key-file", "", "PEM client key for the source")
	fs.StringVar(&o.tlsServerName, "tls-server-name", "", "server name to verify the source brokers' certificates against")
	o.sasl.register(fs)
	o.schemaRegistry.register(fs)
	fs.Var(&o.config, "config", "mirror config KEY=VALUE, for example mirror.metadata.refresh.interval.ms=30000 (repeatable)")
	fs.Var(&o.resetConfig, "reset-config", "with --update: return the config KEY to its default (repeatable)")
	fs.BoolVar(&o.dryRun, "dry-run", false, "with --create: validate the mirror (and reach its source) without creating it; with --add: resolve and check the topics, and with --continue print per partition what continuing would do; with --remove: print what a failover now would leave behind; each changing nothing")
	fs.BoolVar(&o.skipConnectivityCheck, "skip-connectivity-check", false, "do not contact the source cluster when creating")
	fs.BoolVar(&o.skipChecks, "skip-checks", false, "with --add: add even if the preflight checks of the clusters (see --check) fail")
	fs.IntVar(&o.replicationFactor, "replication-factor", 0, "replication factor of the destination topics (default: the destination's)")
	fs.BoolVar(&o.recreate, "recreate", false, "when restarting a stopped topic, drop and recreate the destination topic instead of failing on divergence")
	fs.BoolVar(&o.continueHistory, "continue", false, "fail back: accept a destination topic that holds the source's history (the source was mirrored from it), proven from the source's __mirror_state (or by comparing records), and mirror only what follows")
	fs.BoolVar(&o.keepDivergent, "keep-divergent", false, "with --continue: keep a divergent tail (destination records the source never had) and mirror after it, instead of failing the partition; the tail shows in --describe")
	fs.BoolVar(&o.failed, "failed", false, "describe only FAILED partitions")
	fs.BoolVar(&o.json, "json", false, "describe as JSON")
	fs.DurationVar(&o.wait, "wait", 0, "with --add, --pause, --resume or --remove: wait up to this long (e.g. 30s, at most 5m) for every partition to get there, printing progress")

	for _, a := range args {
		if name, _, _ := strings.Cut(strings.TrimLeft(a, "-"), "="); strings.HasPrefix(a, "-") && name == "bootstrap-server" {
			// Kafka's own tools take --bootstrap-server; this CLI talks
			// to the kmirror server instead.
			return nil, usagef("kmirror mirrors talks to the kmirror REST API, not to Kafka: use --server URL (or KMIRROR_SERVER) instead of --bootstrap-server")
		}
	}
	if err := parseFlags(fs, args, stdout); err != nil {
		return nil, err
	}
	if fs.NArg() > 0 {
		return nil, usagef("unexpected argument %q", fs.Arg(0))
	}
	fs.Visit(func(f *flag.Flag) { o.set[f.Name] = true })

	var chosen []string
	for _, a := range mirrorsActions {
		if *actions[a] {
			chosen = append(chosen, "--"+a)
			o.action = a
		}
	}
	switch len(chosen) {
	case 0:
		return nil, usagef("an action is required: one of --%s", strings.Join(mirrorsActions, ", --"))
	case 1:
	default:
		return nil, usagef("only one action at a time, not %s", strings.Join(chosen, " and "))
	}
	for name, applies := range mirrorsFlagActions {
		if o.set[name] && !slices.Contains(applies, o.action) {
			return nil, usagef("--%s does not apply to --%s", name, o.action)
		}
	}
	var required []string
	switch o.action {
	case "create":
		required = []string{"mirror", "source-bootstrap"}
	case "delete", "sync", "check":
		required = []string{"mirror"}
	case "update":
		required = []string{"mirror"}
		if len(o.config) == 0 && len(o.resetConfig) == 0 {
			return nil, usagef("--update needs what to change: --config KEY=VALUE or --reset-config KEY")
		}
		for _, k := range o.resetConfig {
			if _, both := o.config[k]; both {
				return nil, usagef("%s is both set (--config) and reset (--reset-config)", k)
			}
		}
	case "add", "pause", "resume", "remove":
		required = []string{"mirror", "topic"}
	}
	if o.set["wait"] && o.dryRun && (o.action == "remove" || o.action == "add") {
		return nil, usagef("--wait does not apply to --%s --dry-run: nothing is changed, so there is nothing to wait for", o.action)
	}
	if o.keepDivergent && !o.continueHistory {
		return nil, usagef("--keep-divergent says what --continue does with a divergent tail: give it with --continue")
	}
	if o.set["wait"] && (o.wait <= 0 || o.wait > maxCLIWait) {
		return nil, usagef("--wait %s is out of range (0s, %s]", o.wait, maxCLIWait)
	}
	for _, name := range required {
		if !o.set[name] {
			return nil, usagef("--%s requires --%s", o.action, name)
		}
	}
	return o, nil
}

// configFlag collects repeated --config KEY=VALUE flags.
type configFlag map[string]string

func (c *configFlag) String() string { return "" }

func (c *configFlag) Set(s string) error {
	key, value, ok := strings.Cut(s, "=")
	key = strings.TrimSpace(key)
	if !ok || key == "" {
		return fmt.Errorf("%q is not KEY=VALUE", s)
	}
	if *c == nil {
		*c = configFlag{}
	}
	if _, dup := (*c)[key]; dup {
		return fmt.Errorf("%s is given twice", key)
	}
	(*c)[key] = value
	return nil
}

// listFlag collects a repeated flag's values.
type listFlag []string

func (l *listFlag) String() string { return strings.Join(*l, ",") }

func (l *listFlag) Set(s string) error {
	s = strings.TrimSpace(s)
	if s == "" {
		return errors.New("empty")
	}
	if slices.Contains(*l, s) {
		return fmt.Errorf("%s is given twice", s)
	}
	*l = append(*l, s)
	return nil
}

// ptr returns a pointer to v, for the generated client's optional fields.
func ptr[T any](v T) *T { return &v }

// ptrOrNil returns nil for the zero value: an omitted optional field.
func ptrOrNil[T comparable](v T) *T {
	var zero T
	if v == zero {
		return nil
	}
	return &v
}

// val dereferences an optional field, giving the zero value for nil.
func val[T any](p *T) T {
	if p == nil {
		var zero T
		return zero
	}
	return *p
}

// topicList formats topic names as Kafka's Java tools print a list: [a, b].
func topicList(topics []string) string {
	return "[" + strings.Join(topics, ", ") + "]"
}

// topicName names a mirror topic by its source name and, when the mirror's
// topic.name.prefix makes it differ, its destination name: orders →
// east.orders. An unprefixed topic prints as it always has.
func topicName(topic, destination string) string {
	if destination == "" || destination == topic {
		return topic
	}
	return topic + " → " + destination
}

// matchList is topicList for an add's matches, with their destination
// names.
func matchList(matches []client.TopicMatch) string {
	names := make([]string, len(matches))
	for i, m := range matches {
		names[i] = topicName(m.Topic, m.DestinationTopic)
	}
	return topicList(names)
}

func readSecretFile(flagName, path string) (string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("--%s: %w", flagName, err)
	}
	return string(b), nil
}

// tokenMechanism says whether a SASL mechanism signs in without a password.
func tokenMechanism(m string) bool {
	m = strings.ToUpper(m)
	return m == "AWS_MSK_IAM" || m == "OAUTHBEARER"
}

// sourceSpec builds the create request's source from the flags, reading the
// password and TLS files.
func (o *mirrorsOptions) sourceSpec() (client.SourceSpec, error) {
	src := client.SourceSpec{
		BootstrapServers: o.sourceBootstrap,
		SecurityProtocol: ptrOrNil(client.SecurityProtocol(strings.ToUpper(o.securityProtocol))),
		SaslMechanism:    ptrOrNil(client.SASLMechanism(strings.ToUpper(o.saslMechanism))),
		SaslUsername:     ptrOrNil(o.saslUsername),
		TlsServerName:    ptrOrNil(o.tlsServerName),
	}
	switch {
	case o.saslPasswordFile != "":
		pw, err := readSecretFile("sasl-password-file", o.saslPasswordFile)
		if err != nil {
			return src, err
		}
		// A password file usually ends with a newline that is not part of it.
		src.SaslPassword = ptrOrNil(strings.TrimRight(pw, "\r\n"))
	case strings.HasPrefix(strings.ToUpper(o.securityProtocol), "SASL_") && !tokenMechanism(o.saslMechanism):
		// Only with SASL and a password: a password left in the
		// environment must not make a PLAINTEXT, SSL, AWS_MSK_IAM or
		// OAUTHBEARER mirror invalid.
		src.SaslPassword = ptrOrNil(os.Getenv("KMIRROR_SOURCE_SASL_PASSWORD"))
	}
	if err := o.sasl.apply(&src, strings.ToUpper(o.saslMechanism)); err != nil {
		return src, err
	}
	if err := o.schemaRegistry.apply(&src); err != nil {
		return src, err
	}
	for _, f := range []struct {
		flag, path string
		dst        **string
	}{
		{"tls-ca-file", o.tlsCAFile, &src.TlsCaPem},
		{"tls-cert-file", o.tlsCertFile, &src.TlsCertPem},
		{"tls-key-file", o.tlsKeyFile, &src.TlsKeyPem},
	} {
		if f.path == "" {
			continue
		}
		pem, err := readSecretFile(f.flag, f.path)
		if err != nil {
			return src, err
		}
		*f.dst = ptr(pem)
	}
	return src, nil
}
