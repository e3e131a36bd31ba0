package service

import (
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// Mirror configuration keys (docs/design.md, "Metadata sync"). Values are strings, as in
// Kafka; each key has a type that is checked when it is set.
const (
	CfgMetadataRefreshIntervalMs = "mirror.metadata.refresh.interval.ms"
	CfgTopicsInclude             = "topics.include"
	CfgTopicsExclude             = "topics.exclude"
	CfgGroupsInclude             = "groups.include"
	CfgGroupsExclude             = "groups.exclude"
	CfgACLsInclude               = "acls.include"
	CfgTopicPropertiesExclude    = "topic.properties.exclude"
	CfgCompressionType           = "mirror.compression.type"
	CfgThrottledRate             = "mirror.replication.throttled.rate"
	CfgTopicNamePrefix           = "topic.name.prefix"
	CfgGroupNamePrefix           = "group.name.prefix"
	CfgSchemaSyncIntervalMs      = "schema.sync.interval.ms"
	CfgSchemaSubjectsInclude     = "schema.subjects.include"
	CfgSchemaRegistryContext     = "schema.registry.context"
)

// MaxNamePrefix is the longest topic.name.prefix or group.name.prefix: it
// leaves 49 characters of Kafka's 249 for the source topic's name.
const MaxNamePrefix = 200

// CompressionSource is mirror.compression.type's default: each batch keeps
// the codec it has on the source.
const CompressionSource = "source"

// MinThrottledRate is the lowest replication throttle, in bytes a second:
// a copy waits for its batch's bytes, and below this one source batch of
// 1 MiB would hold a partition for more than a quarter of an hour.
const MinThrottledRate = 1024

type configKind int

const (
	kindLong    configKind = iota // a decimal integer within [min, max]
	kindRegex                     // an RE2 pattern matched against whole names; "" matches nothing
	kindList                      // comma-separated names; an entry may end in * as a prefix wildcard
	kindEnum                      // one of the key's values
	kindPrefix                    // "" or the start of a legal topic name
	kindContext                   // "" or a Schema Registry context: a dot and a name, such as .east
)

type configKey struct {
	kind     configKind
	def      string
	min, max int64
	values   []string // kindEnum's
}

var configKeys = map[string]configKey{
	CfgMetadataRefreshIntervalMs: {kind: kindLong, def: "30000", min: 1000, max: 86_400_000},
	CfgTopicsInclude:             {kind: kindRegex, def: ""},
	CfgTopicsExclude:             {kind: kindRegex, def: "__.*"},
	CfgGroupsInclude:             {kind: kindRegex, def: ".*"},
	CfgGroupsExclude:             {kind: kindRegex, def: ""},
	CfgACLsInclude:               {kind: kindRegex, def: ".*"},
	CfgTopicPropertiesExclude: {kind: kindList, def: "follower.replication.throttled.replicas," +
		"leader.replication.throttled.replicas,message.timestamp.*," +
		"unclean.leader.election.enable,min.insync.replicas"},
	CfgCompressionType: {kind: kindEnum, def: CompressionSource,
		values: []string{CompressionSource, "none", "gzip", "snappy", "lz4", "zstd"}},
	// 0: no throttle. Otherwise at least MinThrottledRate (validateConfig).
	CfgThrottledRate: {kind: kindLong, def: "0", min: 0, max: 1 << 40},
	// Fixed once the mirror has topics (UpdateMirror): each topic row keeps
	// the destination name it was created with.
	CfgTopicNamePrefix: {kind: kindPrefix, def: ""},
	CfgGroupNamePrefix: {kind: kindPrefix, def: ""},
	// The Schema Registry sync of a mirror that names a source registry:
	// how often it runs, which subjects it copies beyond its topics' own
	// (<topic>-key and <topic>-value), and the destination context it
	// writes them into ("" is the default context).
	CfgSchemaSyncIntervalMs:  {kind: kindLong, def: "10000", min: 1000, max: 86_400_000},
	CfgSchemaSubjectsInclude: {kind: kindRegex, def: ""},
	CfgSchemaRegistryContext: {kind: kindContext, def: ""},
}

// ConfigKeys returns the known configuration keys, sorted.
func ConfigKeys() []string {
	keys := make([]string, 0, len(configKeys))
	for k := range configKeys {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// EffectiveConfig returns every known key with its set value or its default.
func EffectiveConfig(set map[string]string) map[string]string {
	out := make(map[string]string, len(configKeys))
	for k, ck := range configKeys {
		out[k] = ck.def
		if v, ok := set[k]; ok {
			out[k] = v
		}
	}
	return out
}

// validateConfig checks keys and value types, reporting each bad entry.
func validateConfig(v *validation, cfg map[string]string) {
	for _, k := range sortedKeys(cfg) {
		val := cfg[k]
		field := "config." + k
		ck, ok := configKeys[k]
		if !ok {
			v.addf(field, "unknown config key %q (known: %s)", k, strings.Join(ConfigKeys(), ", "))
			continue
		}
		switch ck.kind {
		case kindLong:
			n, err := strconv.ParseInt(strings.TrimSpace(val), 10, 64)
			if err != nil {
				v.addf(field, "value %q is not an integer", val)
			} else if n < ck.min || n > ck.max {
				v.addf(field, "value %d is out of range [%d, %d]", n, ck.min, ck.max)
			} else if k == CfgThrottledRate && n > 0 && n < MinThrottledRate {
				v.addf(field, "value %d is below %d bytes a second (0 turns the throttle off)", n, MinThrottledRate)
			}
		case kindEnum:
			if !slices.Contains(ck.values, val) {
				v.addf(field, "value %q is not one of %s", val, strings.Join(ck.values, ", "))
			}
		case kindRegex:
			if val == "" {
				continue
			}
			if _, err := CompilePattern(val); err != nil {
				v.addf(field, "%s", err)
			}
		case kindPrefix:
			if msg := badPrefix(val); msg != "" {
				v.addf(field, "%s", msg)
			}
		case kindContext:
			if msg := badContext(val); msg != "" {
				v.addf(field, "%s", msg)
			}
		case kindList:
			for _, e := range strings.Split(val, ",") {
				e = strings.TrimSpace(e)
				if e == "" && val != "" {
					v.addf(field, "value %q has an empty entry", val)
					break
				}
				if strings.Contains(strings.TrimSuffix(e, "*"), "*") {
					v.addf(field, "entry %q: * is only allowed at the end", e)
					break
				}
			}
		}
	}
}

// badPrefix says what is wrong with a name prefix, or "".
func badPrefix(p string) string {
	if len(p) > MaxNamePrefix {
		return fmt.Sprintf("value is %d characters long; at most %d", len(p), MaxNamePrefix)
	}
	if i := strings.IndexFunc(p, func(r rune) bool { return !isNameRune(r) }); i >= 0 {
		r, _ := utf8.DecodeRuneInString(p[i:]) // the character, not its first byte
		return fmt.Sprintf("value %q has %q: a Kafka name holds only ASCII letters, digits, '.', '_' and '-'", p, r)
	}
	if strings.HasPrefix(p, "__") {
		return fmt.Sprintf("value %q starts with __, which Kafka and kmirror keep for internal topics", p)
	}
	return ""
}

// MaxRegistryContext is the longest schema.registry.context, its dot
// included.
const MaxRegistryContext = 200

// badContext says what is wrong with a Schema Registry context, or "".
// The name after the dot takes only the characters of a Kafka name, so that
// no ':' (which ends a qualified subject's context) or '/' reaches a
// registry URL.
func badContext(c string) string {
	if c == "" {
		return ""
	}
	name, ok := strings.CutPrefix(c, ".")
	switch {
	case !ok || name == "":
		return fmt.Sprintf("value %q: want \"\" (the default context) or a dot followed by a name, such as .east", c)
	case len(c) > MaxRegistryContext:
		return fmt.Sprintf("value is %d characters long; at most %d", len(c), MaxRegistryContext)
	}
	if i := strings.IndexFunc(name, func(r rune) bool { return !isNameRune(r) }); i >= 0 {
		r, _ := utf8.DecodeRuneInString(name[i:])
		return fmt.Sprintf("value %q has %q: a context's name holds only ASCII letters, digits, '.', '_' and '-'", c, r)
	}
	return ""
}

func isNameRune(r rune) bool {
	return r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '.' || r == '_' || r == '-'
}

// DestinationTopic is the name a mirror with this config gives source
// topic src on the destination. Only a new topic row takes it: a row keeps
// the name it was created with (repo.Topic.DestTopic).
func DestinationTopic(cfg map[string]string, src string) string {
	return cfg[CfgTopicNamePrefix] + src
}

// DestinationGroup is the name a mirror with this config gives source
// consumer group g on the destination.
func DestinationGroup(cfg map[string]string, g string) string {
	return cfg[CfgGroupNamePrefix] + g
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// CopySettings are the mirror configs the data plane follows while it
// copies.
type CopySettings struct {
	// Compression is the codec the destination's batches get:
	// CompressionSource keeps each source batch's own.
	Compression string
	// ThrottledRate is the mirror's copy rate limit in bytes a second; 0
	// is none.
	ThrottledRate int64
}

// CopySettingsOf reads a mirror's copy settings from its set config. Values
// were checked when they were set; one that does not parse (a row written
// by hand) counts as the default.
func CopySettingsOf(set map[string]string) CopySettings {
	s := CopySettings{Compression: CompressionSource}
	if v, ok := set[CfgCompressionType]; ok && slices.Contains(configKeys[CfgCompressionType].values, v) {
		s.Compression = v
	}
	if n, err := strconv.ParseInt(strings.TrimSpace(set[CfgThrottledRate]), 10, 64); err == nil && n >= MinThrottledRate {
		s.ThrottledRate = n
	}
	return s
}

// SchemaSyncConfig is a mirror's schema sync settings.
type SchemaSyncConfig struct {
	// Interval is how often the mirror's subjects are synced.
	Interval time.Duration
	// SubjectRegex selects source subjects by whole name, beyond the
	// mirror's topics' own; "" selects none.
	SubjectRegex string
	// Context is the destination registry context, such as ".east"; "" is
	// the default context.
	Context string
}

// SchemaSyncConfigOf reads a mirror's schema sync settings from its set
// config, defaults filled. Values were checked when they were set; one that
// does not pass (a row written by hand) counts as the default.
func SchemaSyncConfigOf(set map[string]string) SchemaSyncConfig {
	ck := configKeys[CfgSchemaSyncIntervalMs]
	ms, _ := strconv.ParseInt(ck.def, 10, 64)
	if n, err := strconv.ParseInt(strings.TrimSpace(set[CfgSchemaSyncIntervalMs]), 10, 64); err == nil && n >= ck.min && n <= ck.max {
		ms = n
	}
	s := SchemaSyncConfig{Interval: time.Duration(ms) * time.Millisecond}
	if re := set[CfgSchemaSubjectsInclude]; re != "" {
		if _, err := CompilePattern(re); err == nil {
			s.SubjectRegex = re
		}
	}
	if c := set[CfgSchemaRegistryContext]; badContext(c) == "" {
		s.Context = c
	}
	return s
}
