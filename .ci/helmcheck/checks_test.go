package helmcheck

import (
	"fmt"
	"net"
	"path"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metavalidation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
	kjson "sigs.k8s.io/json"
	"sigs.k8s.io/yaml"
)

// problems collects what a check found wrong.
type problems []string

func (p *problems) add(format string, args ...any) { *p = append(*p, fmt.Sprintf(format, args...)) }

// checkAll runs every invariant over one rendered release.
func checkAll(r *rendered, f *facts, alerts *monitoringv1.PrometheusRuleSpec) problems {
	var p problems
	checkMeta(&p, r)
	if len(r.deployments) != 1 {
		p.add("want one Deployment, got %d", len(r.deployments))
		return p
	}
	d := r.deployments[0]
	c := kmirrorContainer(&p, d)
	if c == nil {
		return p
	}
	checkCommand(&p, c, f)
	checkProbes(&p, r, d, c, f)
	checkEnv(&p, c, f)
	checkSecretFiles(&p, r, d, c)
	checkSecurity(&p, d, f)
	checkShutdown(&p, d, c, f)
	checkSelectors(&p, r, d)
	checkServiceAccount(&p, r, d)
	checkResources(&p, c)
	checkMonitoring(&p, r, c, f, alerts)
	if strings.TrimSpace(r.notes) == "" {
		p.add("NOTES.txt renders empty")
	}
	return p
}

// checkMeta: names Kubernetes accepts, the release's namespace, the
// standard labels, no object twice.
func checkMeta(p *problems, r *rendered) {
	seen := map[string]bool{}
	for _, o := range r.objects {
		key := o.kind + "/" + o.meta.Name
		if seen[key] {
			p.add("%s rendered twice", o)
		}
		seen[key] = true
		check := validation.IsDNS1123Subdomain
		if o.kind == "v1 Service" {
			check = validation.IsDNS1123Label
		}
		for _, msg := range check(o.meta.Name) {
			p.add("%s: name: %s", o, msg)
		}
		if o.meta.Namespace != namespace {
			p.add("%s: namespace %q, want the release's %q", o, o.meta.Namespace, namespace)
		}
		for _, err := range metavalidation.ValidateLabels(o.meta.Labels, field.NewPath("metadata", "labels")) {
			p.add("%s: %v", o, err)
		}
		for _, k := range []string{"app.kubernetes.io/name", "app.kubernetes.io/instance", "app.kubernetes.io/managed-by", "helm.sh/chart"} {
			if o.meta.Labels[k] == "" {
				p.add("%s: no label %s", o, k)
			}
		}
		if o.meta.Labels["app.kubernetes.io/instance"] != releaseName || o.meta.Labels["app.kubernetes.io/managed-by"] != "Helm" {
			p.add("%s: labels %v do not name the release %q managed by Helm", o, o.meta.Labels, releaseName)
		}
	}
}

func kmirrorContainer(p *problems, d *appsv1.Deployment) *corev1.Container {
	cs := d.Spec.Template.Spec.Containers
	for i := range cs {
		if cs[i].Name == "kmirror" {
			return &cs[i]
		}
	}
	p.add("Deployment %s: no container named kmirror", d.Name)
	return nil
}

// checkCommand: the image's entrypoint (kmirror) runs its server command.
func checkCommand(p *problems, c *corev1.Container, f *facts) {
	if len(c.Command) > 0 {
		p.add("container kmirror overrides the image's entrypoint with %v", c.Command)
	}
	if len(c.Args) == 0 || c.Args[0] != "server" || !f.subcommands["server"] {
		p.add("container kmirror runs %v, want the kmirror server command (commands in cmd/kmirror/main.go: %v)", c.Args, keys(f.subcommands))
	}
	if c.Image == "" || strings.HasSuffix(c.Image, ":") {
		p.add("container kmirror: image %q has no tag", c.Image)
	}
}

// env returns the container's variable named name, or nil.
func env(c *corev1.Container, name string) *corev1.EnvVar {
	for i := range c.Env {
		if c.Env[i].Name == name {
			return &c.Env[i]
		}
	}
	return nil
}

// containerPort resolves a port given by name or number to the container's
// port number; 0 if the container has no such port.
func containerPort(c *corev1.Container, port intstr.IntOrString) int32 {
	for _, cp := range c.Ports {
		if (port.Type == intstr.String && cp.Name == port.StrVal) || (port.Type == intstr.Int && cp.ContainerPort == port.IntVal) {
			return cp.ContainerPort
		}
	}
	return 0
}

// checkProbes: readiness on the route served by s.readyz, liveness on
// s.healthz's, startup on an open route, all on the port the server listens
// on, which is the container port the Service targets.
func checkProbes(p *problems, r *rendered, d *appsv1.Deployment, c *corev1.Container, f *facts) {
	var listenPort int32
	if e := env(c, "KMIRROR_LISTEN"); e == nil || e.ValueFrom != nil {
		p.add("KMIRROR_LISTEN is not set to a literal address: the probes' port cannot be checked against it")
	} else if _, port, err := net.SplitHostPort(e.Value); err != nil {
		p.add("KMIRROR_LISTEN %q: %v", e.Value, err)
	} else if n, err := strconv.Atoi(port); err != nil {
		p.add("KMIRROR_LISTEN %q: port %q is not a number", e.Value, port)
	} else {
		listenPort = int32(n)
	}
	httpPort := containerPort(c, intstr.FromString("http"))
	if httpPort == 0 {
		p.add("container kmirror has no port named http")
	} else if httpPort != listenPort {
		p.add("container port http is %d, the server listens on %d (KMIRROR_LISTEN)", httpPort, listenPort)
	}
	open := map[string]bool{}
	for _, route := range f.openRoutes {
		open[route] = true
	}
	probe := func(what string, pr *corev1.Probe, handler string) {
		if pr == nil {
			if handler != "" {
				p.add("container kmirror has no %s probe", what)
			}
			return
		}
		if pr.HTTPGet == nil {
			p.add("%s probe is not an HTTP GET", what)
			return
		}
		g := pr.HTTPGet
		switch want := f.openRoutes[handler]; {
		case handler != "" && want == "":
			p.add("%s probe: api/server.go serves no open route with handler s.%s", what, handler)
		case handler != "" && g.Path != want:
			p.add("%s probe path %q, want %q (s.%s in api/server.go)", what, g.Path, want, handler)
		case !open[g.Path]:
			p.add("%s probe path %q is not a route served without a token (api/server.go: %v)", what, g.Path, f.openRoutes)
		}
		if port := containerPort(c, g.Port); port == 0 || port != listenPort {
			p.add("%s probe port %s is container port %d, the server listens on %d", what, g.Port.String(), port, listenPort)
		}
		if g.Scheme != "" && g.Scheme != corev1.URISchemeHTTP {
			p.add("%s probe scheme %s: the chart's server speaks HTTP", what, g.Scheme)
		}
	}
	probe("readiness", c.ReadinessProbe, "readyz")
	probe("liveness", c.LivenessProbe, "healthz")
	probe("startup", c.StartupProbe, "")
	if pr := c.ReadinessProbe; pr != nil && time.Duration(pr.TimeoutSeconds)*time.Second <= f.readyTimeout {
		p.add("readiness probe timeout %ds is not above /readyz's own %s (api/system.go): a slow database reads as a probe timeout, not a 503", pr.TimeoutSeconds, f.readyTimeout)
	}
	for _, s := range r.services {
		for _, sp := range s.Spec.Ports {
			if port := containerPort(c, sp.TargetPort); port == 0 || port != listenPort {
				p.add("Service %s port %s targets %s, container port %d, the server listens on %d", s.Name, sp.Name, sp.TargetPort.String(), port, listenPort)
			}
		}
	}
}

// secretEnv are names whose values are secrets: never a literal in the
// Deployment.
var secretEnv = regexp.MustCompile(`DATABASE_URL$|PASSWORD$|_TOKEN$`)

// checkEnv: every KMIRROR_* variable is one the server reads, none twice,
// secrets from Secrets, the instance id from the pod's name.
func checkEnv(p *problems, c *corev1.Container, f *facts) {
	seen := map[string]bool{}
	for _, e := range c.Env {
		if seen[e.Name] {
			p.add("env %s set twice", e.Name)
		}
		seen[e.Name] = true
		if strings.HasPrefix(e.Name, "KMIRROR_") && !f.serverEnv[e.Name] {
			p.add("env %s: kmirror server does not read it (cmd/kmirror/server*.go)", e.Name)
		}
		if secretEnv.MatchString(e.Name) && (e.ValueFrom == nil || e.ValueFrom.SecretKeyRef == nil) {
			p.add("env %s holds a secret but does not come from a Secret", e.Name)
		}
	}
	if e := env(c, "KMIRROR_INSTANCE_ID"); e == nil || e.ValueFrom == nil || e.ValueFrom.FieldRef == nil || e.ValueFrom.FieldRef.FieldPath != "metadata.name" {
		p.add("KMIRROR_INSTANCE_ID is not the pod's name (fieldRef metadata.name): instances need unique ids")
	}
	if env(c, "KMIRROR_DATABASE_URL") == nil {
		p.add("KMIRROR_DATABASE_URL is not set")
	}
	if env(c, "KMIRROR_API_TOKENS_FILE") == nil && env(c, "KMIRROR_API_TOKEN") == nil {
		p.add("no API tokens (KMIRROR_API_TOKENS_FILE): the server refuses to listen beyond loopback without them")
	}
}

// renderedSecret is the chart's Secret of that name, or nil.
func renderedSecret(r *rendered, name string) *corev1.Secret {
	for _, s := range r.secrets {
		if s.Name == name {
			return s
		}
	}
	return nil
}

func secretHas(s *corev1.Secret, key string) bool {
	_, a := s.Data[key]
	_, b := s.StringData[key]
	return a || b
}

// checkSecretFiles: every KMIRROR_*_FILE names a file in a read-only,
// whole-directory Secret mount, named by the Secret's key; every Secret
// volume is read through one; every secretKeyRef names a key the chart's
// Secret has.
func checkSecretFiles(p *problems, r *rendered, d *appsv1.Deployment, c *corev1.Container) {
	volumes := map[string]*corev1.Volume{}
	for i, v := range d.Spec.Template.Spec.Volumes {
		volumes[v.Name] = &d.Spec.Template.Spec.Volumes[i]
	}
	used := map[string]bool{}
	for _, e := range c.Env {
		if !strings.HasPrefix(e.Name, "KMIRROR_") || !strings.HasSuffix(e.Name, "_FILE") {
			continue
		}
		if e.ValueFrom != nil || !path.IsAbs(e.Value) {
			p.add("env %s=%q is not an absolute path", e.Name, e.Value)
			continue
		}
		dir, file := path.Split(e.Value)
		dir = path.Clean(dir)
		var mount *corev1.VolumeMount
		for i, m := range c.VolumeMounts {
			if path.Clean(m.MountPath) == dir {
				mount = &c.VolumeMounts[i]
			}
		}
		if mount == nil {
			p.add("env %s=%s: no volume is mounted at %s", e.Name, e.Value, dir)
			continue
		}
		v := volumes[mount.Name]
		switch {
		case v == nil:
			p.add("env %s: mount %s names no volume", e.Name, mount.Name)
			continue
		case v.Secret == nil:
			p.add("env %s: volume %s is not a Secret", e.Name, mount.Name)
			continue
		case mount.SubPath != "" || mount.SubPathExpr != "":
			p.add("env %s: volume %s is mounted with a subPath, so a changed Secret never reaches the file", e.Name, mount.Name)
		case !mount.ReadOnly:
			p.add("env %s: volume %s is mounted writable", e.Name, mount.Name)
		}
		used[mount.Name] = true
		key := file
		if len(v.Secret.Items) > 0 {
			i := slices.IndexFunc(v.Secret.Items, func(it corev1.KeyToPath) bool { return it.Path == file })
			if i < 0 {
				p.add("env %s=%s: Secret volume %s has no item with path %s", e.Name, e.Value, v.Name, file)
				continue
			}
			if key = v.Secret.Items[i].Key; key != file {
				p.add("env %s=%s: the file is Secret key %q, not a file named after its key", e.Name, e.Value, key)
			}
		}
		if s := renderedSecret(r, v.Secret.SecretName); s != nil && !secretHas(s, key) {
			p.add("env %s: the chart's Secret %s has no key %q", e.Name, s.Name, key)
		}
	}
	for _, v := range d.Spec.Template.Spec.Volumes {
		if v.Secret == nil {
			continue
		}
		if !used[v.Name] {
			p.add("Secret volume %s is mounted for no KMIRROR_*_FILE variable", v.Name)
		}
		if m := v.Secret.DefaultMode; m == nil || *m&0o007 != 0 {
			p.add("Secret volume %s: files readable by others (defaultMode %v)", v.Name, m)
		}
	}
	for _, e := range c.Env {
		if e.ValueFrom == nil || e.ValueFrom.SecretKeyRef == nil {
			continue
		}
		ref := e.ValueFrom.SecretKeyRef
		if ref.Name == "" || ref.Key == "" {
			p.add("env %s: secretKeyRef without a name or key", e.Name)
		} else if s := renderedSecret(r, ref.Name); s != nil && !secretHas(s, ref.Key) {
			p.add("env %s: the chart's Secret %s has no key %q", e.Name, ref.Name, ref.Key)
		}
	}
}

// checkSecurity: the image's non-root user, nothing that widens a
// container's rights, for every container the pod runs.
func checkSecurity(p *problems, d *appsv1.Deployment, f *facts) {
	pod := d.Spec.Template.Spec
	if pod.HostNetwork || pod.HostPID || pod.HostIPC {
		p.add("pod shares the host's network, PID or IPC namespace")
	}
	psc := pod.SecurityContext
	if psc == nil {
		psc = &corev1.PodSecurityContext{}
	}
	all := append(slices.Clone(pod.InitContainers), pod.Containers...)
	for _, c := range all {
		sc := c.SecurityContext
		if sc == nil {
			sc = &corev1.SecurityContext{}
		}
		user := cmpOr(sc.RunAsUser, psc.RunAsUser)
		group := cmpOr(sc.RunAsGroup, psc.RunAsGroup)
		switch {
		case user == nil:
			p.add("container %s: no runAsUser: the image's user is a name, which the kubelet cannot check as non-root", c.Name)
		case *user == 0:
			p.add("container %s runs as root", c.Name)
		case *user != f.uid:
			p.add("container %s runs as uid %d, the image's user is %d (Dockerfile useradd --uid)", c.Name, *user, f.uid)
		}
		// useradd gives the user's own group the uid as its gid when free,
		// as it is in the image.
		if group == nil || *group != f.uid {
			p.add("container %s: runAsGroup %v, want the image user's group %d", c.Name, deref(group), f.uid)
		}
		if nonRoot := cmpOr(sc.RunAsNonRoot, psc.RunAsNonRoot); nonRoot == nil || !*nonRoot {
			p.add("container %s: runAsNonRoot is not true", c.Name)
		}
		if sc.Privileged != nil && *sc.Privileged {
			p.add("container %s is privileged", c.Name)
		}
		if sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation {
			p.add("container %s: allowPrivilegeEscalation is not false", c.Name)
		}
		if sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem {
			p.add("container %s: root filesystem is writable", c.Name)
		}
		if sc.Capabilities == nil || !slices.Contains(sc.Capabilities.Drop, "ALL") {
			p.add("container %s does not drop ALL capabilities", c.Name)
		} else if len(sc.Capabilities.Add) > 0 {
			p.add("container %s adds capabilities %v", c.Name, sc.Capabilities.Add)
		}
		seccomp := cmpOr(sc.SeccompProfile, psc.SeccompProfile)
		if seccomp == nil || seccomp.Type != corev1.SeccompProfileTypeRuntimeDefault {
			p.add("container %s: seccomp profile is not RuntimeDefault", c.Name)
		}
	}
}

// checkShutdown: the kubelet's grace period outlasts the preStop sleep, the
// server's shutdown budget and its backstop, so a graceful stop is never
// cut short before the leases are handed back.
func checkShutdown(p *problems, d *appsv1.Deployment, c *corev1.Container, f *facts) {
	var sleep time.Duration
	if c.Lifecycle != nil && c.Lifecycle.PreStop != nil {
		h := c.Lifecycle.PreStop
		switch {
		case h.Sleep != nil:
			sleep = time.Duration(h.Sleep.Seconds) * time.Second
		case h.Exec != nil && len(h.Exec.Command) == 2 && path.Base(h.Exec.Command[0]) == "sleep":
			n, err := strconv.Atoi(h.Exec.Command[1])
			if err != nil {
				p.add("preStop sleeps %q", h.Exec.Command[1])
			}
			sleep = time.Duration(n) * time.Second
		default:
			p.add("preStop hook is neither a sleep action nor sleep N: the check cannot tell how long it takes")
		}
	}
	budget := f.defaultShutdown
	if e := env(c, "KMIRROR_SHUTDOWN_TIMEOUT"); e != nil {
		var err error
		if budget, err = time.ParseDuration(e.Value); err != nil {
			p.add("KMIRROR_SHUTDOWN_TIMEOUT %q: %v", e.Value, err)
		}
	}
	grace := 30 * time.Second // Kubernetes' default
	if g := d.Spec.Template.Spec.TerminationGracePeriodSeconds; g != nil {
		grace = time.Duration(*g) * time.Second
	}
	if need := sleep + budget + f.backstop; grace <= need {
		p.add("terminationGracePeriodSeconds %s does not exceed preStop sleep %s + shutdown timeout %s + backstop %s = %s",
			grace, sleep, budget, f.backstop, need)
	}
}

// checkSelectors: the Deployment, Service, PodDisruptionBudget and spread
// constraints select the pods; the ServiceMonitor and Ingress reach the
// Service.
func checkSelectors(p *problems, r *rendered, d *appsv1.Deployment) {
	podLabels := labels.Set(d.Spec.Template.Labels)
	selects := func(what string, sel *metav1.LabelSelector) {
		s, err := metav1.LabelSelectorAsSelector(sel)
		switch {
		case err != nil:
			p.add("%s: selector: %v", what, err)
		case sel == nil || s.Empty():
			p.add("%s: empty selector selects everything", what)
		case !s.Matches(podLabels):
			p.add("%s: selector %s does not match the pods' labels %v", what, s, podLabels)
		}
	}
	selects("Deployment "+d.Name, d.Spec.Selector)
	for _, s := range r.services {
		selects("Service "+s.Name, &metav1.LabelSelector{MatchLabels: s.Spec.Selector})
	}
	for _, b := range r.pdbs {
		selects("PodDisruptionBudget "+b.Name, b.Spec.Selector)
		replicas := int32(1)
		if d.Spec.Replicas != nil {
			replicas = *d.Spec.Replicas
		}
		switch {
		case b.Spec.MaxUnavailable != nil:
			if n, err := intstr.GetScaledValueFromIntOrPercent(b.Spec.MaxUnavailable, int(replicas), true); err != nil || n < 1 {
				p.add("PodDisruptionBudget %s: maxUnavailable %s lets no pod be evicted: node drains would hang", b.Name, b.Spec.MaxUnavailable.String())
			}
		case b.Spec.MinAvailable != nil:
			if n, err := intstr.GetScaledValueFromIntOrPercent(b.Spec.MinAvailable, int(replicas), true); err != nil || n >= int(replicas) {
				p.add("PodDisruptionBudget %s: minAvailable %s of %d replicas lets no pod be evicted", b.Name, b.Spec.MinAvailable.String(), replicas)
			}
		default:
			p.add("PodDisruptionBudget %s sets neither maxUnavailable nor minAvailable", b.Name)
		}
	}
	for i, t := range d.Spec.Template.Spec.TopologySpreadConstraints {
		selects(fmt.Sprintf("topologySpreadConstraints[%d] (%s)", i, t.TopologyKey), t.LabelSelector)
	}
	for _, sm := range r.serviceMonitors {
		sel, err := metav1.LabelSelectorAsSelector(&sm.Spec.Selector)
		found := false
		for _, s := range r.services {
			if err == nil && !sel.Empty() && sel.Matches(labels.Set(s.Labels)) {
				found = true
				for _, ep := range sm.Spec.Endpoints {
					if !slices.ContainsFunc(s.Spec.Ports, func(sp corev1.ServicePort) bool { return sp.Name == ep.Port }) {
						p.add("ServiceMonitor %s: endpoint port %q is not a port of Service %s", sm.Name, ep.Port, s.Name)
					}
				}
			}
		}
		if !found {
			p.add("ServiceMonitor %s selects none of the chart's Services", sm.Name)
		}
		if ns := sm.Spec.NamespaceSelector; !ns.Any && len(ns.MatchNames) > 0 && !slices.Contains(ns.MatchNames, namespace) {
			p.add("ServiceMonitor %s looks in namespaces %v, not the release's", sm.Name, ns.MatchNames)
		}
	}
	for _, in := range r.ingresses {
		for _, rule := range in.Spec.Rules {
			if rule.HTTP == nil {
				p.add("Ingress %s: rule for %q has no paths", in.Name, rule.Host)
				continue
			}
			for _, hp := range rule.HTTP.Paths {
				b := hp.Backend.Service
				if b == nil {
					p.add("Ingress %s: path %s has no Service backend", in.Name, hp.Path)
					continue
				}
				i := slices.IndexFunc(r.services, func(s *corev1.Service) bool { return s.Name == b.Name })
				if i < 0 {
					p.add("Ingress %s: backend Service %s is not the chart's", in.Name, b.Name)
					continue
				}
				if !slices.ContainsFunc(r.services[i].Spec.Ports, func(sp corev1.ServicePort) bool {
					return (b.Port.Name != "" && sp.Name == b.Port.Name) || (b.Port.Number != 0 && sp.Port == b.Port.Number)
				}) {
					p.add("Ingress %s: backend port %+v is not a port of Service %s", in.Name, b.Port, b.Name)
				}
			}
		}
		for _, tls := range in.Spec.TLS {
			if tls.SecretName == "" {
				p.add("Ingress %s: TLS for %v names no Secret", in.Name, tls.Hosts)
			}
		}
	}
}

// checkServiceAccount: kmirror does not call the Kubernetes API, so no pod
// carries a service account token.
func checkServiceAccount(p *problems, r *rendered, d *appsv1.Deployment) {
	pod := d.Spec.Template.Spec
	if pod.AutomountServiceAccountToken == nil || *pod.AutomountServiceAccountToken {
		p.add("pods mount a service account token")
	}
	for _, sa := range r.serviceAccounts {
		if sa.AutomountServiceAccountToken == nil || *sa.AutomountServiceAccountToken {
			p.add("ServiceAccount %s: automountServiceAccountToken is not false", sa.Name)
		}
		if pod.ServiceAccountName != sa.Name {
			p.add("ServiceAccount %s is rendered, but the pods run as %q", sa.Name, pod.ServiceAccountName)
		}
	}
}

var memLimitRE = regexp.MustCompile(`^(\d+)(B|KiB|MiB|GiB|TiB)?$`)

// checkResources: requests for the scheduler, a memory limit at or above the
// request, and a Go soft limit below it.
func checkResources(p *problems, c *corev1.Container) {
	req, lim := c.Resources.Requests, c.Resources.Limits
	if _, ok := req[corev1.ResourceCPU]; !ok {
		p.add("no CPU request")
	}
	mreq, okReq := req[corev1.ResourceMemory]
	mlim, okLim := lim[corev1.ResourceMemory]
	if !okReq || !okLim {
		p.add("memory request and limit must both be set (request %v, limit %v)", okReq, okLim)
		return
	}
	if mlim.Cmp(mreq) < 0 {
		p.add("memory limit %s below the request %s", mlim.String(), mreq.String())
	}
	e := env(c, "GOMEMLIMIT")
	if e == nil {
		return
	}
	m := memLimitRE.FindStringSubmatch(e.Value)
	if m == nil {
		p.add("GOMEMLIMIT %q is not a number of bytes with a unit the Go runtime takes (B, KiB, MiB, GiB, TiB)", e.Value)
		return
	}
	n, _ := strconv.ParseInt(m[1], 10, 64)
	shift := map[string]uint{"": 0, "B": 0, "KiB": 10, "MiB": 20, "GiB": 30, "TiB": 40}[m[2]]
	soft := resource.NewQuantity(n<<shift, resource.BinarySI)
	if soft.Cmp(mlim) >= 0 {
		p.add("GOMEMLIMIT %s is not below the memory limit %s", e.Value, mlim.String())
	}
}

// checkMonitoring: a ServiceMonitor scrapes the metrics route with a token
// unless the server serves it without one, and the PrometheusRule carries
// exactly docs/alerts.yml's rules.
func checkMonitoring(p *problems, r *rendered, c *corev1.Container, f *facts, alerts *monitoringv1.PrometheusRuleSpec) {
	public := false
	if e := env(c, "KMIRROR_PUBLIC_METRICS"); e != nil {
		public, _ = strconv.ParseBool(e.Value)
	}
	for _, sm := range r.serviceMonitors {
		for _, ep := range sm.Spec.Endpoints {
			if ep.Path != f.metricsPath {
				p.add("ServiceMonitor %s scrapes %q, the server serves metrics on %q", sm.Name, ep.Path, f.metricsPath)
			}
			if ep.Scheme != nil && *ep.Scheme != "http" {
				p.add("ServiceMonitor %s scrapes over %s; the chart's server speaks HTTP", sm.Name, *ep.Scheme)
			}
			a := ep.Authorization
			token := a != nil && a.Credentials != nil && a.Credentials.Name != "" && a.Credentials.Key != "" &&
				(a.Type == "" || strings.EqualFold(a.Type, "Bearer"))
			if !token && !public {
				p.add("ServiceMonitor %s sends no bearer token, and the server does not serve /metrics without one (KMIRROR_PUBLIC_METRICS)", sm.Name)
			}
			if err := ep.Validate(); err != nil {
				p.add("ServiceMonitor %s: %v", sm.Name, err)
			}
		}
	}
	for _, pr := range r.prometheusRules {
		if !reflect.DeepEqual(pr.Spec, *alerts) {
			p.add("PrometheusRule %s: %s", pr.Name, ruleDiff(pr.Spec, *alerts))
		}
	}
}

// ruleDiff says where two rule specs first differ.
func ruleDiff(got, want monitoringv1.PrometheusRuleSpec) string {
	if len(got.Groups) != len(want.Groups) {
		return fmt.Sprintf("%d groups, docs/alerts.yml has %d", len(got.Groups), len(want.Groups))
	}
	for i := range want.Groups {
		g, w := got.Groups[i], want.Groups[i]
		if len(g.Rules) != len(w.Rules) {
			return fmt.Sprintf("group %s: %d rules, docs/alerts.yml has %d", g.Name, len(g.Rules), len(w.Rules))
		}
		for j := range w.Rules {
			if !reflect.DeepEqual(g.Rules[j], w.Rules[j]) {
				gy, _ := yaml.Marshal(g.Rules[j])
				wy, _ := yaml.Marshal(w.Rules[j])
				return fmt.Sprintf("group %s rule %d differs from docs/alerts.yml:\n%s\nwant:\n%s", g.Name, j, gy, wy)
			}
		}
		g.Rules, w.Rules = nil, nil
		if !reflect.DeepEqual(g, w) {
			return fmt.Sprintf("group %s's settings differ from docs/alerts.yml: %+v, want %+v", w.Name, g, w)
		}
	}
	return "differs from docs/alerts.yml"
}

// readAlerts decodes docs/alerts.yml strictly as a PrometheusRule's spec.
func readAlerts() (*monitoringv1.PrometheusRuleSpec, error) {
	raw, err := readRepo("docs/alerts.yml")
	if err != nil {
		return nil, err
	}
	js, err := yaml.YAMLToJSONStrict([]byte(raw))
	if err != nil {
		return nil, fmt.Errorf("docs/alerts.yml: %w", err)
	}
	var spec monitoringv1.PrometheusRuleSpec
	strict, err := kjson.UnmarshalStrict(js, &spec, kjson.DisallowDuplicateFields, kjson.DisallowUnknownFields)
	if err == nil && len(strict) > 0 {
		err = fmt.Errorf("%v", strict)
	}
	if err != nil {
		return nil, fmt.Errorf("docs/alerts.yml as a PrometheusRule spec: %w", err)
	}
	if len(spec.Groups) == 0 {
		return nil, fmt.Errorf("docs/alerts.yml: no rule groups")
	}
	return &spec, nil
}

func cmpOr[T any](a, b *T) *T {
	if a != nil {
		return a
	}
	return b
}

func deref[T any](v *T) any {
	if v == nil {
		return nil
	}
	return *v
}

func keys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}
