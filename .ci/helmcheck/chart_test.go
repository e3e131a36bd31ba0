package helmcheck

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	"helm.sh/helm/v4/pkg/action"
	"helm.sh/helm/v4/pkg/chart/common"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/intstr"
)

var (
	setupOnce   sync.Once
	setupFacts  *facts
	setupAlerts *monitoringv1.PrometheusRuleSpec
	setupErr    error
)

// setup reads kmirror's sources once for every test.
func setup(t *testing.T) (*facts, *monitoringv1.PrometheusRuleSpec) {
	t.Helper()
	setupOnce.Do(func() {
		if setupFacts, setupErr = readFacts(); setupErr != nil {
			return
		}
		setupAlerts, setupErr = readAlerts()
	})
	if setupErr != nil {
		t.Fatal(setupErr)
	}
	return setupFacts, setupAlerts
}

func testdata(t *testing.T, name string) string {
	t.Helper()
	if name == "" {
		return ""
	}
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// Kinds, as rendered objects name them.
const (
	kDeployment     = "apps/v1 Deployment"
	kService        = "v1 Service"
	kServiceAccount = "v1 ServiceAccount"
	kSecret         = "v1 Secret"
	kPDB            = "policy/v1 PodDisruptionBudget"
	kIngress        = "networking.k8s.io/v1 Ingress"
	kServiceMonitor = "monitoring.coreos.com/v1 ServiceMonitor"
	kPrometheusRule = "monitoring.coreos.com/v1 PrometheusRule"
)

// chartCases are the values the chart is rendered with: its defaults and
// deployments as operators would write them (testdata/).
var chartCases = []struct {
	name   string
	values string // file in testdata; "" for the chart's defaults
	kinds  map[string]int
	expect func(p *problems, r *rendered)
}{
	{
		name:  "defaults",
		kinds: map[string]int{kDeployment: 1, kService: 1, kServiceAccount: 1, kPDB: 1},
		expect: func(p *problems, r *rendered) {
			d := r.deployments[0]
			c := &d.Spec.Template.Spec.Containers[0]
			wantReplicas(p, d, 3)
			if _, ok := c.Resources.Limits[corev1.ResourceCPU]; ok {
				p.add("a CPU limit by default")
			}
			wantQuantity(p, "memory limit", c.Resources.Limits, corev1.ResourceMemory, "1Gi")
			keys := map[string]string{}
			for _, t := range d.Spec.Template.Spec.TopologySpreadConstraints {
				keys[t.TopologyKey] = string(t.WhenUnsatisfiable)
			}
			if keys["topology.kubernetes.io/zone"] != "ScheduleAnyway" || keys["kubernetes.io/hostname"] != "DoNotSchedule" {
				p.add("spread %v, want zones (ScheduleAnyway) and hosts (DoNotSchedule)", keys)
			}
			if mu := r.pdbs[0].Spec.MaxUnavailable; mu == nil || *mu != intstr.FromInt32(1) {
				p.add("PodDisruptionBudget maxUnavailable %v, want 1", mu)
			}
			wantSecretRef(p, c, "KMIRROR_DATABASE_URL", "kmirror-database", "url")
			wantEnv(p, c, "KMIRROR_API_TOKENS_FILE", "/etc/kmirror/api-tokens/tokens")
			wantEnv(p, c, "KMIRROR_SECRET_KEY_FILE", "/var/lib/kmirror/secret.key")
			wantEnv(p, c, "KMIRROR_LEASE_TTL", "15s")
			wantEnv(p, c, "KMIRROR_LEASE_OUTAGE_GRACE", "60s")
			wantEnv(p, c, "KMIRROR_LOG_LEVEL", "info")
			if env(c, "KMIRROR_DESTINATION_BOOTSTRAP") != nil || env(c, "KMIRROR_PUBLIC_METRICS") != nil {
				p.add("defaults set a destination or public metrics")
			}
			for _, e := range c.Env {
				if strings.HasPrefix(e.Name, "KMIRROR_DESTINATION_SCHEMA_REGISTRY_") {
					p.add("defaults set %s", e.Name)
				}
			}
			if !strings.Contains(r.notes, "No destination Schema Registry is set (destination.schemaRegistry.url)") {
				p.add("NOTES.txt does not say no Schema Registry is set:\n%s", r.notes)
			}
			if !strings.Contains(r.notes, "kubectl -n mirroring create secret generic kmirror-database") {
				p.add("NOTES.txt does not say how to create the Secrets:\n%s", r.notes)
			}
		},
	},
	{
		name:   "production",
		values: "production.yaml",
		kinds:  map[string]int{kDeployment: 1, kService: 1, kServiceAccount: 1, kPDB: 1, kIngress: 1, kServiceMonitor: 1, kPrometheusRule: 1},
		expect: func(p *problems, r *rendered) {
			c := &r.deployments[0].Spec.Template.Spec.Containers[0]
			if c.Image != "registry.example.com/platform/kmirror:1.4.2" {
				p.add("image %s", c.Image)
			}
			wantSecretRef(p, c, "KMIRROR_DATABASE_URL", "kmirror-postgres", "url")
			wantSecretRef(p, c, "KMIRROR_DESTINATION_SASL_PASSWORD", "kmirror-kafka", "password")
			wantEnv(p, c, "KMIRROR_DESTINATION_SECURITY_PROTOCOL", "SASL_SSL")
			wantEnv(p, c, "KMIRROR_DESTINATION_SASL_MECHANISM", "SCRAM-SHA-512")
			wantEnv(p, c, "KMIRROR_DESTINATION_TLS_CA_FILE", "/etc/kmirror/destination-tls/ca.crt")
			wantEnv(p, c, "KMIRROR_DESTINATION_TLS_SERVER_NAME", "kafka.example.com")
			wantEnv(p, c, "KMIRROR_STATE_TOPIC_REPLICATION_FACTOR", "3")
			wantEnv(p, c, "HTTPS_PROXY", "http://proxy.example.com:3128")
			if env(c, "KMIRROR_DESTINATION_TLS_CERT_FILE") != nil {
				p.add("a client certificate without certKey")
			}
			wantEnv(p, c, "KMIRROR_DESTINATION_SCHEMA_REGISTRY_URL", "https://registry-0.schemas:8081,https://registry-1.schemas:8081")
			wantEnv(p, c, "KMIRROR_DESTINATION_SCHEMA_REGISTRY_USERNAME", "kmirror")
			wantSecretRef(p, c, "KMIRROR_DESTINATION_SCHEMA_REGISTRY_PASSWORD", "kmirror-schema-registry", "password")
			wantEnv(p, c, "KMIRROR_DESTINATION_SCHEMA_REGISTRY_TLS_CA_FILE", "/etc/kmirror/destination-schema-registry-tls/ca.crt")
			for _, name := range []string{"KMIRROR_DESTINATION_SCHEMA_REGISTRY_BEARER_TOKEN", "KMIRROR_DESTINATION_SCHEMA_REGISTRY_TLS_CERT_FILE"} {
				if env(c, name) != nil {
					p.add("%s set, though the values give no bearer token or client certificate", name)
				}
			}
			if !strings.Contains(r.notes, "copied, with their ids, into https://registry-0.schemas:8081") ||
				!strings.Contains(r.notes, "Secret kmirror-schema-registry, key password") {
				p.add("NOTES.txt does not name the destination Schema Registry and its Secret:\n%s", r.notes)
			}
			// Every Secret the pods read is named, the destination's SASL
			// and TLS ones too, so none is found missing only at start.
			for _, want := range []string{"kmirror-kafka: the destination's SASL secrets (SCRAM-SHA-512: the password under key password)",
				"the destination's TLS files (CA under key ca.crt)"} {
				if !strings.Contains(r.notes, want) {
					p.add("NOTES.txt lacks %q:\n%s", want, r.notes)
				}
			}
			in := r.ingresses[0]
			if len(in.Spec.TLS) != 1 || in.Spec.TLS[0].SecretName != "kmirror-tls" || in.Spec.IngressClassName == nil || *in.Spec.IngressClassName != "nginx" {
				p.add("Ingress TLS %+v, class %v", in.Spec.TLS, in.Spec.IngressClassName)
			}
			sm := r.serviceMonitors[0]
			if a := sm.Spec.Endpoints[0].Authorization; a == nil || a.Credentials == nil || a.Credentials.Name != "kmirror-prometheus-token" {
				p.add("ServiceMonitor authorization %+v", a)
			}
			for _, o := range []map[string]string{sm.Labels, r.prometheusRules[0].Labels} {
				if o["release"] != "kube-prometheus-stack" {
					p.add("monitoring labels %v lack release", o)
				}
			}
		},
	},
	{
		name:   "public-metrics",
		values: "public-metrics.yaml",
		kinds:  map[string]int{kDeployment: 1, kService: 1, kServiceAccount: 1, kPDB: 1, kServiceMonitor: 1},
		expect: func(p *problems, r *rendered) {
			d := r.deployments[0]
			c := &d.Spec.Template.Spec.Containers[0]
			wantReplicas(p, d, 5)
			wantEnv(p, c, "KMIRROR_PUBLIC_METRICS", "true")
			wantEnv(p, c, "KMIRROR_SHUTDOWN_TIMEOUT", "10s")
			wantEnv(p, c, "KMIRROR_LEASE_TTL", "30s")
			wantQuantity(p, "CPU request", c.Resources.Requests, corev1.ResourceCPU, "2")
			wantQuantity(p, "memory limit", c.Resources.Limits, corev1.ResourceMemory, "4Gi")
			if a := r.serviceMonitors[0].Spec.Endpoints[0].Authorization; a != nil {
				p.add("ServiceMonitor sends a token to public metrics: %+v", a)
			}
		},
	},
	{
		name:   "msk-iam",
		values: "msk-iam.yaml",
		kinds:  map[string]int{kDeployment: 1, kService: 1, kServiceAccount: 1, kPDB: 1},
		expect: func(p *problems, r *rendered) {
			c := &r.deployments[0].Spec.Template.Spec.Containers[0]
			wantEnv(p, c, "KMIRROR_DESTINATION_SASL_MECHANISM", "AWS_MSK_IAM")
			wantEnv(p, c, "KMIRROR_DESTINATION_AWS_REGION", "eu-west-1")
			for _, name := range []string{"KMIRROR_DESTINATION_AWS_ACCESS_KEY_ID", "KMIRROR_DESTINATION_AWS_SECRET_ACCESS_KEY",
				"KMIRROR_DESTINATION_SASL_USERNAME", "KMIRROR_DESTINATION_SASL_PASSWORD"} {
				if env(c, name) != nil {
					p.add("%s set for the pod's own AWS identity", name)
				}
			}
			if sa := r.serviceAccounts[0]; sa.Annotations["eks.amazonaws.com/role-arn"] != "arn:aws:iam::111122223333:role/kmirror" {
				p.add("the service account's annotations %v lack its IAM role", sa.Annotations)
			}
		},
	},
	{
		name:   "oauthbearer",
		values: "oauthbearer.yaml",
		kinds:  map[string]int{kDeployment: 1, kService: 1, kServiceAccount: 1, kPDB: 1},
		expect: func(p *problems, r *rendered) {
			c := &r.deployments[0].Spec.Template.Spec.Containers[0]
			wantEnv(p, c, "KMIRROR_DESTINATION_SASL_MECHANISM", "OAUTHBEARER")
			wantEnv(p, c, "KMIRROR_DESTINATION_SASL_OAUTHBEARER_TOKEN_ENDPOINT_URL", "https://login.example.com/oauth2/v2.0/token")
			wantEnv(p, c, "KMIRROR_DESTINATION_SASL_OAUTHBEARER_CLIENT_ID", "kmirror-dr")
			wantEnv(p, c, "KMIRROR_DESTINATION_SASL_OAUTHBEARER_SCOPE", "api://kafka/.default")
			wantEnv(p, c, "KMIRROR_DESTINATION_SASL_OAUTHBEARER_EXTENSIONS", "identityPoolId=pool-XyZ1,logicalCluster=lkc-abc12")
			wantSecretRef(p, c, "KMIRROR_DESTINATION_SASL_OAUTHBEARER_CLIENT_SECRET", "kmirror-oauth", "client_secret")
			if env(c, "KMIRROR_DESTINATION_SASL_PASSWORD") != nil {
				p.add("a SASL password with OAUTHBEARER")
			}
		},
	},
	{
		name:   "schema-registry-bearer",
		values: "schema-registry-bearer.yaml",
		kinds:  map[string]int{kDeployment: 1, kService: 1, kServiceAccount: 1, kPDB: 1},
		expect: func(p *problems, r *rendered) {
			d := r.deployments[0]
			c := &d.Spec.Template.Spec.Containers[0]
			wantEnv(p, c, "KMIRROR_DESTINATION_SCHEMA_REGISTRY_URL", "https://psrc-1.example.com")
			wantSecretRef(p, c, "KMIRROR_DESTINATION_SCHEMA_REGISTRY_BEARER_TOKEN", "kmirror-schema-registry", "token")
			for _, name := range []string{"KMIRROR_DESTINATION_SCHEMA_REGISTRY_USERNAME", "KMIRROR_DESTINATION_SCHEMA_REGISTRY_PASSWORD",
				"KMIRROR_DESTINATION_SCHEMA_REGISTRY_TLS_CA_FILE"} {
				if env(c, name) != nil {
					p.add("%s set with a bearer token and the system roots", name)
				}
			}
			for _, v := range d.Spec.Template.Spec.Volumes {
				if v.Name == "destination-schema-registry-tls" {
					p.add("a registry TLS volume without tls.existingSecret")
				}
			}
			if !strings.Contains(r.notes, "Its bearer token is read from Secret kmirror-schema-registry, key token") {
				p.add("NOTES.txt does not name the bearer token's Secret:\n%s", r.notes)
			}
		},
	},
	{
		name:   "single",
		values: "single.yaml",
		kinds:  map[string]int{kDeployment: 1, kService: 1, kSecret: 3},
		expect: func(p *problems, r *rendered) {
			d := r.deployments[0]
			wantReplicas(p, d, 1)
			if n := len(d.Spec.Template.Spec.TopologySpreadConstraints); n != 0 {
				p.add("%d spread constraints, want none", n)
			}
			if d.Spec.Template.Spec.ServiceAccountName != "default" {
				p.add("service account %q", d.Spec.Template.Spec.ServiceAccountName)
			}
			for _, a := range []string{"checksum/database", "checksum/api-tokens"} {
				if d.Spec.Template.Annotations[a] == "" {
					p.add("no %s annotation: a changed Secret would not restart the pods", a)
				}
			}
			key := renderedSecret(r, "kmirror-secret-key")
			if key == nil || key.Annotations["helm.sh/resource-policy"] != "keep" {
				p.add("the chart's secret key Secret is missing or not kept")
			}
		},
	},
}

func TestChart(t *testing.T) {
	f, alerts := setup(t)
	for _, tc := range chartCases {
		t.Run(tc.name, func(t *testing.T) {
			r, err := render(testdata(t, tc.values))
			if err != nil {
				t.Fatal(err)
			}
			got := map[string]int{}
			for _, o := range r.objects {
				got[o.kind]++
			}
			for k := range kinds {
				if got[k] != tc.kinds[k] {
					t.Errorf("%d %s, want %d", got[k], k, tc.kinds[k])
				}
			}
			p := checkAll(r, f, alerts)
			if !t.Failed() && tc.expect != nil {
				tc.expect(&p, r)
			}
			for _, msg := range p {
				t.Error(msg)
			}
			if !t.Failed() {
				t.Logf("%d objects, every check passed", len(r.objects))
			}
		})
	}
}

// TestChartRefuses: values Kubernetes would take but kmirror would not
// fail at `helm install`, with a message saying what to change.
func TestChartRefuses(t *testing.T) {
	for _, tc := range []struct{ name, values, want string }{
		{"grace too short", "terminationGracePeriodSeconds: 10", "must exceed shutdown.preStopSleepSeconds"},
		{"config key not a server variable", "config: {log_level: debug}", "keys are the server's KMIRROR_*"},
		{"config key the chart sets", "config: {KMIRROR_LISTEN: ':9090'}", "set by the chart"},
		{"destination in config", "config: {KMIRROR_DESTINATION_BOOTSTRAP: 'k:9092'}", "configured under destination"},
		{"token in config", "config: {KMIRROR_API_TOKEN: abc}", "in clear"},
		{"API TLS in config", "config: {KMIRROR_TLS_CERT_FILE: /x}", "plain HTTP"},
		{"malformed secret key", "secretKey: {value: abc}", "64 hex digits"},
		{"scrape without a token", "serviceMonitor: {enabled: true}", "needs a token"},
		{"SASL without its Secret", "destination: {securityProtocol: SASL_SSL, sasl: {mechanism: PLAIN, username: u}}", "SASL password"},
		{"SASL over PLAINTEXT", "destination: {sasl: {mechanism: PLAIN, username: u, existingSecret: s}}", "needs destination.securityProtocol SASL_SSL"},
		{"unknown mechanism", "destination: {securityProtocol: SASL_SSL, sasl: {mechanism: GSSAPI, existingSecret: s}}", "GSSAPI is not PLAIN"},
		{"OAUTHBEARER without endpoint", "destination: {securityProtocol: SASL_SSL, sasl: {mechanism: OAUTHBEARER, existingSecret: s, oauthbearer: {clientId: c}}}", "tokenEndpointUrl"},
		{"OAUTHBEARER over http", "destination: {securityProtocol: SASL_SSL, sasl: {mechanism: OAUTHBEARER, existingSecret: s, oauthbearer: {clientId: c, tokenEndpointUrl: 'http://idp/token'}}}", "https token endpoint"},
		{"OAUTHBEARER without its Secret", "destination: {securityProtocol: SASL_SSL, sasl: {mechanism: OAUTHBEARER, oauthbearer: {clientId: c, tokenEndpointUrl: 'https://idp/token'}}}", "OAuth client secret"},
		{"registry URL without a scheme", "destination: {schemaRegistry: {url: 'registry:8081'}}", "not an http:// or https:// URL"},
		{"registry URL with credentials", "destination: {schemaRegistry: {url: 'https://key:secret@registry'}}", "without credentials"},
		{"registry user without its Secret", "destination: {schemaRegistry: {url: 'https://registry', username: u}}", "registry's password"},
		{"registry basic auth and bearer", "destination: {schemaRegistry: {url: 'https://registry', username: u, bearerTokenKey: token, existingSecret: s}}", "not both"},
		{"registry TLS over http", "destination: {schemaRegistry: {url: 'http://registry', tls: {existingSecret: ca}}}", "no url is https://"},
		{"registry settings without a URL", "destination: {schemaRegistry: {username: u, existingSecret: s}}", "but no url"},
		{"registry in config", "config: {KMIRROR_DESTINATION_SCHEMA_REGISTRY_URL: 'https://registry'}", "configured under destination"},
		{"AWS keys without their Secret", "destination: {securityProtocol: SASL_SSL, sasl: {mechanism: AWS_MSK_IAM, aws: {accessKeyId: AKIA}}}", "AWS secret access key"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := render(tc.values)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("render: %v, want an error with %q", err, tc.want)
			}
		})
	}
}

// TestChecksCatch breaks a rendered release, through the values or in its
// decoded objects, and wants each check to report it: a check that cannot
// fail checks nothing.
func TestChecksCatch(t *testing.T) {
	f, alerts := setup(t)
	deployment := func(r *rendered) *appsv1.Deployment { return r.deployments[0] }
	container := func(r *rendered) *corev1.Container { return &r.deployments[0].Spec.Template.Spec.Containers[0] }
	setEnv := func(r *rendered, name, value string) {
		if e := env(container(r), name); e != nil {
			e.Value, e.ValueFrom = value, nil
		}
	}
	for _, tc := range []struct {
		name   string
		values string
		mutate func(r *rendered, f *facts)
		want   string
	}{
		// Through the values.
		{name: "config the server does not read", values: "config: {KMIRROR_NOT_A_SETTING: '1'}", want: "env KMIRROR_NOT_A_SETTING: kmirror server does not read it"},
		{name: "variable set twice", values: "extraEnv: [{name: KMIRROR_LOG_LEVEL, value: debug}]", want: "env KMIRROR_LOG_LEVEL set twice"},
		{name: "token as a literal", values: "extraEnv: [{name: KMIRROR_API_READ_TOKEN, value: abc}]", want: "KMIRROR_API_READ_TOKEN holds a secret"},
		{name: "root", values: "securityContext: {runAsUser: 0}", want: "runs as root"},
		{name: "another uid", values: "securityContext: {runAsUser: 1000}", want: "the image's user is 10001"},
		{name: "root group", values: "securityContext: {runAsGroup: 0}", want: "runAsGroup 0"},
		{name: "no runAsNonRoot", values: "securityContext: {runAsNonRoot: false}", want: "runAsNonRoot is not true"},
		{name: "writable root", values: "securityContext: {readOnlyRootFilesystem: false}", want: "root filesystem is writable"},
		{name: "capabilities kept", values: "securityContext: {capabilities: {drop: []}}", want: "does not drop ALL"},
		{name: "escalation", values: "securityContext: {allowPrivilegeEscalation: true}", want: "allowPrivilegeEscalation is not false"},
		{name: "no seccomp", values: "securityContext: {seccompProfile: null}\npodSecurityContext: {seccompProfile: null}", want: "not RuntimeDefault"},
		{name: "PDB blocks drains", values: "podDisruptionBudget: {maxUnavailable: 0}", want: "lets no pod be evicted"},
		{name: "spread selects other pods", values: "topologySpreadConstraints: [{topologyKey: kubernetes.io/hostname, maxSkew: 1, whenUnsatisfiable: DoNotSchedule, labelSelector: {matchLabels: {app: other}}}]", want: "does not match the pods' labels"},
		{name: "GOMEMLIMIT above the limit", values: "goMemLimit: 2GiB", want: "not below the memory limit"},
		{name: "GOMEMLIMIT unit", values: "goMemLimit: 900M", want: "unit the Go runtime takes"},
		{name: "readiness timeout", values: "probes: {readiness: {timeoutSeconds: 2}}", want: "not above /readyz's own 2s"},
		{name: "no memory limit", values: "resources: {limits: null}", want: "memory request and limit must both be set"},
		// In the rendered objects, as a broken template would render them.
		{name: "readiness path", mutate: func(r *rendered, _ *facts) { container(r).ReadinessProbe.HTTPGet.Path = "/ready" }, want: `readiness probe path "/ready", want "/readyz"`},
		{name: "liveness on readiness", mutate: func(r *rendered, _ *facts) { container(r).LivenessProbe.HTTPGet.Path = "/readyz" }, want: `liveness probe path "/readyz", want "/healthz"`},
		{name: "probe on a token route", mutate: func(r *rendered, _ *facts) { container(r).StartupProbe.HTTPGet.Path = "/v1/mirrors" }, want: "not a route served without a token"},
		{name: "probe port", mutate: func(r *rendered, _ *facts) { container(r).LivenessProbe.HTTPGet.Port = intstr.FromInt32(9090) }, want: "liveness probe port 9090"},
		{name: "listen elsewhere", mutate: func(r *rendered, _ *facts) { setEnv(r, "KMIRROR_LISTEN", ":9090") }, want: "the server listens on 9090"},
		{name: "service target", mutate: func(r *rendered, _ *facts) { r.services[0].Spec.Ports[0].TargetPort = intstr.FromString("web") }, want: "Service kmirror port http targets web"},
		{name: "grace", mutate: func(r *rendered, _ *facts) {
			g := int64(9)
			deployment(r).Spec.Template.Spec.TerminationGracePeriodSeconds = &g
		}, want: "does not exceed preStop sleep 5s + shutdown timeout 4s + backstop 750ms"},
		{name: "longer budget", mutate: func(r *rendered, _ *facts) { setEnv(r, "KMIRROR_SHUTDOWN_TIMEOUT", "20s") }, want: "shutdown timeout 20s"},
		{name: "default budget", mutate: func(r *rendered, f *facts) {
			c := container(r)
			c.Env = deleteEnv(c.Env, "KMIRROR_SHUTDOWN_TIMEOUT")
			f.defaultShutdown = 30 * time.Second
		}, want: "shutdown timeout 30s"},
		{name: "opaque preStop", mutate: func(r *rendered, _ *facts) {
			h := container(r).Lifecycle.PreStop
			h.Sleep, h.Exec = nil, &corev1.ExecAction{Command: []string{"/bin/sh", "-c", "sleep 5"}}
		}, want: "neither a sleep action"},
		{name: "instance id", mutate: func(r *rendered, _ *facts) { setEnv(r, "KMIRROR_INSTANCE_ID", "kmirror") }, want: "KMIRROR_INSTANCE_ID is not the pod's name"},
		{name: "database URL literal", mutate: func(r *rendered, _ *facts) { setEnv(r, "KMIRROR_DATABASE_URL", "postgres://x") }, want: "KMIRROR_DATABASE_URL holds a secret"},
		{name: "entrypoint", mutate: func(r *rendered, _ *facts) { container(r).Command = []string{"/bin/sh"} }, want: "overrides the image's entrypoint"},
		{name: "subcommand", mutate: func(r *rendered, _ *facts) { container(r).Args = []string{"dev"} }, want: "want the kmirror server command"},
		{name: "tokens file elsewhere", mutate: func(r *rendered, _ *facts) { setEnv(r, "KMIRROR_API_TOKENS_FILE", "/etc/kmirror/tokens") }, want: "no volume is mounted at /etc/kmirror"},
		{name: "key file misnamed", mutate: func(r *rendered, _ *facts) { setEnv(r, "KMIRROR_SECRET_KEY_FILE", "/var/lib/kmirror/key") }, want: "has no item with path key"},
		{name: "item not by key name", mutate: func(r *rendered, _ *facts) {
			deployment(r).Spec.Template.Spec.Volumes[0].Secret.Items[0].Key = "other"
		}, want: `the file is Secret key "other"`},
		{name: "subPath", mutate: func(r *rendered, _ *facts) { container(r).VolumeMounts[0].SubPath = "tokens" }, want: "mounted with a subPath"},
		{name: "writable mount", mutate: func(r *rendered, _ *facts) { container(r).VolumeMounts[1].ReadOnly = false }, want: "mounted writable"},
		{name: "world-readable secret", mutate: func(r *rendered, _ *facts) {
			m := int32(0o444)
			deployment(r).Spec.Template.Spec.Volumes[1].Secret.DefaultMode = &m
		}, want: "readable by others"},
		{name: "unused secret volume", mutate: func(r *rendered, _ *facts) {
			c := container(r)
			c.Env = deleteEnv(c.Env, "KMIRROR_SECRET_KEY_FILE")
		}, want: "Secret volume secret-key is mounted for no"},
		{name: "service selector", mutate: func(r *rendered, _ *facts) { r.services[0].Spec.Selector["app.kubernetes.io/name"] = "other" }, want: "Service kmirror: selector"},
		{name: "pod labels", mutate: func(r *rendered, _ *facts) { delete(deployment(r).Spec.Template.Labels, "app.kubernetes.io/instance") }, want: "PodDisruptionBudget kmirror: selector"},
		{name: "service account token", mutate: func(r *rendered, _ *facts) { deployment(r).Spec.Template.Spec.AutomountServiceAccountToken = nil }, want: "pods mount a service account token"},
		{name: "other service account", mutate: func(r *rendered, _ *facts) { deployment(r).Spec.Template.Spec.ServiceAccountName = "default" }, want: `the pods run as "default"`},
		{name: "namespace", mutate: func(r *rendered, _ *facts) { r.services[0].Namespace = "default" }, want: `namespace "default"`},
		{name: "standard label", mutate: func(r *rendered, _ *facts) { delete(r.pdbs[0].Labels, "helm.sh/chart") }, want: "no label helm.sh/chart"},
		{name: "readyz moved", mutate: func(_ *rendered, f *facts) { f.openRoutes["readyz"] = "/ready" }, want: `want "/ready" (s.readyz in api/server.go)`},
		{name: "image uid changed", mutate: func(_ *rendered, f *facts) { f.uid = 10002 }, want: "the image's user is 10002"},
		{name: "variable no longer read", mutate: func(_ *rendered, f *facts) { delete(f.serverEnv, "KMIRROR_LEASE_TTL") }, want: "env KMIRROR_LEASE_TTL: kmirror server does not read it"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, err := render(tc.values)
			if err != nil {
				t.Fatal(err)
			}
			ff := *f
			ff.openRoutes = clone(f.openRoutes)
			ff.serverEnv = clone(f.serverEnv)
			if tc.mutate != nil {
				tc.mutate(r, &ff)
			}
			p := checkAll(r, &ff, alerts)
			if !strings.Contains(strings.Join(p, "\n"), tc.want) {
				t.Errorf("checks did not report %q; they reported:\n%s", tc.want, strings.Join(p, "\n"))
			}
		})
	}
}

// TestChecksCatchMonitoring: as TestChecksCatch, on the release that has an
// Ingress, a ServiceMonitor and a PrometheusRule.
func TestChecksCatchMonitoring(t *testing.T) {
	f, alerts := setup(t)
	for _, tc := range []struct {
		name   string
		mutate func(r *rendered)
		want   string
	}{
		{"no token", func(r *rendered) { r.serviceMonitors[0].Spec.Endpoints[0].Authorization = nil }, "sends no bearer token"},
		{"metrics path", func(r *rendered) { r.serviceMonitors[0].Spec.Endpoints[0].Path = "/metric" }, `scrapes "/metric"`},
		{"monitor port", func(r *rendered) { r.serviceMonitors[0].Spec.Endpoints[0].Port = "metrics" }, `endpoint port "metrics" is not a port`},
		{"monitor selector", func(r *rendered) { r.serviceMonitors[0].Spec.Selector.MatchLabels["app.kubernetes.io/name"] = "x" }, "selects none of the chart's Services"},
		{"ingress port", func(r *rendered) { r.ingresses[0].Spec.Rules[0].HTTP.Paths[0].Backend.Service.Port.Name = "web" }, "is not a port of Service kmirror"},
		{"ingress service", func(r *rendered) { r.ingresses[0].Spec.Rules[0].HTTP.Paths[0].Backend.Service.Name = "api" }, "backend Service api is not the chart's"},
		{"rule dropped", func(r *rendered) {
			g := &r.prometheusRules[0].Spec.Groups[0]
			g.Rules = g.Rules[1:]
		}, "rules, docs/alerts.yml has"},
		{"rule changed", func(r *rendered) {
			r.prometheusRules[0].Spec.Groups[0].Rules[0].Expr = intstr.FromString("vector(1)")
		}, "rule 0 differs from docs/alerts.yml"},
		{"TLS mount elsewhere", func(r *rendered) {
			c := &r.deployments[0].Spec.Template.Spec.Containers[0]
			env(c, "KMIRROR_DESTINATION_TLS_CA_FILE").Value = "/etc/ssl/ca.crt"
		}, "no volume is mounted at /etc/ssl"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, err := render(testdata(t, "production.yaml"))
			if err != nil {
				t.Fatal(err)
			}
			tc.mutate(r)
			p := checkAll(r, f, alerts)
			if !strings.Contains(strings.Join(p, "\n"), tc.want) {
				t.Errorf("checks did not report %q; they reported:\n%s", tc.want, strings.Join(p, "\n"))
			}
		})
	}
}

// TestDecodeStrict: what the API server's strict field validation refuses,
// the decoding refuses too.
func TestDecodeStrict(t *testing.T) {
	for _, tc := range []struct{ name, doc, want string }{
		{"unknown field", "apiVersion: v1\nkind: Service\nmetadata: {name: a}\nspec: {selectr: {a: b}}", `unknown field "spec.selectr"`},
		{"field in the wrong case", "apiVersion: v1\nkind: Service\nmetadata: {name: a}\nspec: {Selector: {a: b}}", `unknown field "spec.Selector"`},
		{"duplicate field", "apiVersion: v1\nkind: Service\nmetadata: {name: a}\nspec:\n  type: ClusterIP\n  type: NodePort", `key "type" already set`},
		{"unknown kind", "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}", `kind "v1 ConfigMap" is not one the check knows`},
		{"monitoring field", "apiVersion: monitoring.coreos.com/v1\nkind: ServiceMonitor\nmetadata: {name: a}\nspec: {selector: {}, endpoints: [{port: http, bearerToken: x}]}", `unknown field "spec.endpoints[0].bearerToken"`},
		{"bad base64", "apiVersion: v1\nkind: Secret\nmetadata: {name: a}\ndata: {a: not-base64!}", "illegal base64"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := decode("# Source: test.yaml\n" + tc.doc)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("decode: %v, want an error with %q", err, tc.want)
			}
		})
	}
}

// TestAlertsCopy: the chart's files/alerts.yml is docs/alerts.yml. Helm
// packs only the chart's folder, so the rules live there as a copy.
func TestAlertsCopy(t *testing.T) {
	doc, err := readRepo("docs/alerts.yml")
	if err != nil {
		t.Fatal(err)
	}
	chart, err := os.ReadFile(filepath.Join(chartDir, "files/alerts.yml"))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal([]byte(doc), chart) {
		t.Error("deploy/helm/kmirror/files/alerts.yml differs from docs/alerts.yml; copy it: cp docs/alerts.yml deploy/helm/kmirror/files/alerts.yml")
	}
}

// TestLint runs Helm's own linter, strict (warnings fail), with each case's
// values, for the Kubernetes whose API types the check decodes into
// (k8s.io/api v0.37): its deprecation rule flags APIs that release
// deprecates.
func TestLint(t *testing.T) {
	for _, tc := range chartCases {
		t.Run(tc.name, func(t *testing.T) {
			vals, err := common.ReadValues([]byte(testdata(t, tc.values)))
			if err != nil {
				t.Fatal(err)
			}
			lint := action.NewLint()
			lint.Strict = true
			lint.Namespace = namespace
			if lint.KubeVersion, err = common.ParseKubeVersion("v1.37.0"); err != nil {
				t.Fatal(err)
			}
			res := lint.Run([]string{chartDir}, vals.AsMap())
			for _, err := range res.Errors {
				t.Error(err)
			}
			for _, m := range res.Messages {
				t.Log(m)
			}
		})
	}
}

// TestTemplate prints the manifest and notes for HELMCHECK_TEMPLATE (a file
// in testdata, or "defaults"), as `helm template` would; skipped otherwise.
func TestTemplate(t *testing.T) {
	name := os.Getenv("HELMCHECK_TEMPLATE")
	if name == "" {
		t.Skip("HELMCHECK_TEMPLATE=defaults or =production.yaml prints a rendering")
	}
	if name == "defaults" {
		name = ""
	}
	r, err := render(testdata(t, name))
	if err != nil {
		t.Fatal(err)
	}
	fmt.Println(r.manifest)
	fmt.Println("NOTES:\n" + r.notes)
}

func wantReplicas(p *problems, d *appsv1.Deployment, n int32) {
	if d.Spec.Replicas == nil || *d.Spec.Replicas != n {
		p.add("replicas %v, want %d", deref(d.Spec.Replicas), n)
	}
}

func wantEnv(p *problems, c *corev1.Container, name, value string) {
	if e := env(c, name); e == nil || e.Value != value {
		p.add("env %s = %+v, want %q", name, e, value)
	}
}

func wantSecretRef(p *problems, c *corev1.Container, name, secret, key string) {
	e := env(c, name)
	if e == nil || e.ValueFrom == nil || e.ValueFrom.SecretKeyRef == nil ||
		e.ValueFrom.SecretKeyRef.Name != secret || e.ValueFrom.SecretKeyRef.Key != key {
		p.add("env %s = %+v, want Secret %s key %s", name, e, secret, key)
	}
}

func wantQuantity(p *problems, what string, list corev1.ResourceList, name corev1.ResourceName, want string) {
	q, ok := list[name]
	if !ok || q.Cmp(resource.MustParse(want)) != 0 {
		p.add("%s %s, want %s", what, q.String(), want)
	}
}

func deleteEnv(envs []corev1.EnvVar, name string) []corev1.EnvVar {
	var out []corev1.EnvVar
	for _, e := range envs {
		if e.Name != name {
			out = append(out, e)
		}
	}
	return out
}

func clone[K comparable, V any](m map[K]V) map[K]V {
	out := make(map[K]V, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}
