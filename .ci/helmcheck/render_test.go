package helmcheck

import (
	"context"
	"fmt"
	"log/slog"
	"regexp"
	"slices"
	"strconv"
	"strings"

	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	"helm.sh/helm/v4/pkg/action"
	"helm.sh/helm/v4/pkg/chart/common"
	"helm.sh/helm/v4/pkg/chart/v2/loader"
	release "helm.sh/helm/v4/pkg/release/v1"
	releaseutil "helm.sh/helm/v4/pkg/release/v1/util"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kjson "sigs.k8s.io/json"
	"sigs.k8s.io/yaml"
)

// chartDir is the chart, from this module's folder.
const chartDir = "../../deploy/helm/kmirror"

// The release every case renders, on the oldest Kubernetes the chart
// declares (Chart.yaml kubeVersion): Helm's offline default is older.
const (
	releaseName = "kmirror"
	namespace   = "mirroring"
	kubeVersion = "v1.30.0"
)

// kinds are the objects the chart may render, each with the Go type it must
// decode into. Anything else is an error: a kind the check does not know is
// a kind it does not check.
var kinds = map[string]func() any{
	"apps/v1 Deployment":                      func() any { return new(appsv1.Deployment) },
	"v1 Service":                              func() any { return new(corev1.Service) },
	"v1 ServiceAccount":                       func() any { return new(corev1.ServiceAccount) },
	"v1 Secret":                               func() any { return new(corev1.Secret) },
	"policy/v1 PodDisruptionBudget":           func() any { return new(policyv1.PodDisruptionBudget) },
	"networking.k8s.io/v1 Ingress":            func() any { return new(networkingv1.Ingress) },
	"monitoring.coreos.com/v1 ServiceMonitor": func() any { return new(monitoringv1.ServiceMonitor) },
	"monitoring.coreos.com/v1 PrometheusRule": func() any { return new(monitoringv1.PrometheusRule) },
}

// object is one rendered object: where it came from, and its decoded form.
type object struct {
	source string // the template, from Helm's "# Source:" line
	kind   string // "apiVersion Kind"
	meta   *metav1.ObjectMeta
	value  any
}

func (o object) String() string { return fmt.Sprintf("%s %s (%s)", o.kind, o.meta.Name, o.source) }

// rendered is one release's objects, by type, and its NOTES.txt.
type rendered struct {
	objects         []object
	deployments     []*appsv1.Deployment
	services        []*corev1.Service
	serviceAccounts []*corev1.ServiceAccount
	secrets         []*corev1.Secret
	pdbs            []*policyv1.PodDisruptionBudget
	ingresses       []*networkingv1.Ingress
	serviceMonitors []*monitoringv1.ServiceMonitor
	prometheusRules []*monitoringv1.PrometheusRule
	notes           string
	manifest        string // as `helm template` prints it
}

// count is how many objects of kind ("apiVersion Kind") were rendered.
func (r *rendered) count(kind string) int {
	n := 0
	for _, o := range r.objects {
		if o.kind == kind {
			n++
		}
	}
	return n
}

// render installs the chart with values (YAML) as `helm template` does:
// client-side dry run, Helm's default capabilities, no cluster. It returns
// Helm's error for values the chart refuses.
func render(valuesYAML string) (*rendered, error) {
	chrt, err := loader.Load(chartDir)
	if err != nil {
		return nil, fmt.Errorf("load chart: %w", err)
	}
	vals, err := common.ReadValues([]byte(valuesYAML))
	if err != nil {
		return nil, fmt.Errorf("values: %w", err)
	}
	cfg := action.NewConfiguration(action.ConfigurationSetLogger(slog.DiscardHandler))
	install := action.NewInstall(cfg)
	install.DryRunStrategy = action.DryRunClient
	install.ReleaseName = releaseName
	install.Namespace = namespace
	if install.KubeVersion, err = common.ParseKubeVersion(kubeVersion); err != nil {
		return nil, err
	}
	rel, err := install.RunWithContext(context.Background(), chrt, vals.AsMap())
	if err != nil {
		return nil, err
	}
	r, ok := rel.(*release.Release)
	if !ok {
		return nil, fmt.Errorf("helm returned a %T, not a v1 release", rel)
	}
	out := &rendered{notes: r.Info.Notes, manifest: r.Manifest}
	var docs []string
	for _, h := range r.Hooks {
		docs = append(docs, "# Source: "+h.Path+"\n"+h.Manifest)
	}
	docs = append(docs, splitInOrder(r.Manifest)...)
	for _, d := range docs {
		o, err := decode(d)
		if err != nil {
			return nil, err
		}
		if o == nil {
			continue
		}
		out.objects = append(out.objects, *o)
		switch v := o.value.(type) {
		case *appsv1.Deployment:
			out.deployments = append(out.deployments, v)
		case *corev1.Service:
			out.services = append(out.services, v)
		case *corev1.ServiceAccount:
			out.serviceAccounts = append(out.serviceAccounts, v)
		case *corev1.Secret:
			out.secrets = append(out.secrets, v)
		case *policyv1.PodDisruptionBudget:
			out.pdbs = append(out.pdbs, v)
		case *networkingv1.Ingress:
			out.ingresses = append(out.ingresses, v)
		case *monitoringv1.ServiceMonitor:
			out.serviceMonitors = append(out.serviceMonitors, v)
		case *monitoringv1.PrometheusRule:
			out.prometheusRules = append(out.prometheusRules, v)
		}
	}
	return out, nil
}

// splitInOrder splits a manifest into its documents in Helm's order
// (SplitManifests keys them manifest-0, manifest-1, ...).
func splitInOrder(manifest string) []string {
	m := releaseutil.SplitManifests(manifest)
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	index := func(k string) int {
		n, _ := strconv.Atoi(strings.TrimPrefix(k, "manifest-"))
		return n
	}
	slices.SortFunc(keys, func(a, b string) int { return index(a) - index(b) })
	docs := make([]string, len(keys))
	for i, k := range keys {
		docs[i] = m[k]
	}
	return docs
}

var sourceRE = regexp.MustCompile(`(?m)^# Source: (\S+)`)

// decode decodes one YAML document strictly into its kind's Go type, as the
// API server's strict field validation would: an unknown field, a field in
// the wrong case, a duplicate field or an unknown kind is an error. An empty
// document is nil.
func decode(doc string) (*object, error) {
	source := "?"
	if m := sourceRE.FindStringSubmatch(doc); m != nil {
		source = m[1]
	}
	js, err := yaml.YAMLToJSONStrict([]byte(doc))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", source, err)
	}
	if s := strings.TrimSpace(string(js)); s == "null" || s == "" {
		return nil, nil
	}
	var tm metav1.TypeMeta
	if err := kjson.UnmarshalCaseSensitivePreserveInts(js, &tm); err != nil {
		return nil, fmt.Errorf("%s: %w", source, err)
	}
	kind := tm.APIVersion + " " + tm.Kind
	newValue, ok := kinds[kind]
	if !ok {
		return nil, fmt.Errorf("%s: kind %q is not one the check knows (add it to kinds, with its checks)", source, kind)
	}
	v := newValue()
	strict, err := kjson.UnmarshalStrict(js, v, kjson.DisallowDuplicateFields, kjson.DisallowUnknownFields)
	if err != nil {
		return nil, fmt.Errorf("%s: %s: %w", source, kind, err)
	}
	if len(strict) > 0 {
		return nil, fmt.Errorf("%s: %s: %v", source, kind, strict)
	}
	return &object{source: source, kind: kind, meta: objectMeta(v), value: v}, nil
}

// objectMeta is the metadata of any of the kinds.
func objectMeta(v any) *metav1.ObjectMeta {
	return v.(interface{ GetObjectMeta() metav1.Object }).GetObjectMeta().(*metav1.ObjectMeta)
}
