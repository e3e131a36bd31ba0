package main

import (
	"bytes"
	"encoding/json"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
	"text/template"

	"github.com/prometheus/common/model"
	"go.yaml.in/yaml/v3"
)

// The shipped examples, docs/alerts.yml and docs/grafana-dashboard.json, are
// checked against a real scrape (checkMetricsDocs, from TestMetricsLint):
// every kmirror metric they name must be one the server exports.
//
// The rules are read strictly with the rule file's schema (unknown keys are
// errors) rather than with Prometheus's own rulefmt: that package's module
// upgrades go-openapi, x/tools and sigs.k8s.io/yaml under the swag and
// oapi-codegen generators, too high a price for a test. Their
// templates are parsed as Prometheus parses them (text/template, with
// $labels and $value defined) and their durations with prometheus/common.
// The PromQL itself is parsed by Prometheus's grammar from npm in
// TestMonitoringExamplesParse; here only its brackets and metric names.

type ruleFile struct {
	Groups []struct {
		Name     string         `yaml:"name"`
		Interval model.Duration `yaml:"interval"`
		Rules    []struct {
			Alert         string            `yaml:"alert"`
			Record        string            `yaml:"record"`
			Expr          string            `yaml:"expr"`
			For           model.Duration    `yaml:"for"`
			KeepFiringFor model.Duration    `yaml:"keep_firing_for"`
			Labels        map[string]string `yaml:"labels"`
			Annotations   map[string]string `yaml:"annotations"`
		} `yaml:"rules"`
	} `yaml:"groups"`
}

type dashboard struct {
	Title      string `json:"title"`
	UID        string `json:"uid"`
	Templating struct {
		List []struct {
			Name       string `json:"name"`
			Type       string `json:"type"`
			Definition string `json:"definition"`
		} `json:"list"`
	} `json:"templating"`
	Panels []struct {
		ID      int    `json:"id"`
		Title   string `json:"title"`
		Type    string `json:"type"`
		GridPos struct {
			H, W, X, Y int
		} `json:"gridPos"`
		Targets []struct {
			RefID string `json:"refId"`
			Expr  string `json:"expr"`
		} `json:"targets"`
	} `json:"panels"`
}

// metricTypes reads the families of an exposition from its TYPE lines.
func metricTypes(body []byte) map[string]string {
	types := map[string]string{}
	for line := range strings.Lines(string(body)) {
		if f := strings.Fields(line); len(f) == 4 && f[0] == "#" && f[1] == "TYPE" {
			types[f[2]] = f[3]
		}
	}
	return types
}

var kmirrorName = regexp.MustCompile(`\bkmirror_[a-zA-Z0-9_:]*`)

// checkExpr reports an expression whose brackets do not balance, that
// names no kmirror metric, or that names one the server does not export.
func checkExpr(t *testing.T, where, expr string, types map[string]string) {
	t.Helper()
	var stack []rune
	inString := false
	for _, c := range expr {
		switch {
		case c == '"':
			inString = !inString
		case inString:
		case strings.ContainsRune("([{", c):
			stack = append(stack, c)
		case strings.ContainsRune(")]}", c):
			if len(stack) == 0 || stack[len(stack)-1] != map[rune]rune{')': '(', ']': '[', '}': '{'}[c] {
				t.Errorf("%s: unbalanced %q in %s", where, c, expr)
				return
			}
			stack = stack[:len(stack)-1]
		}
	}
	if len(stack) > 0 || inString {
		t.Errorf("%s: unclosed bracket or string in %s", where, expr)
	}
	names := kmirrorName.FindAllString(expr, -1)
	if len(names) == 0 {
		t.Errorf("%s: names no kmirror metric: %s", where, expr)
	}
	for _, n := range names {
		if _, ok := types[n]; ok {
			continue
		}
		base := strings.TrimSuffix(strings.TrimSuffix(strings.TrimSuffix(n, "_bucket"), "_sum"), "_count")
		if typ := types[base]; base == n || (typ != "histogram" && typ != "summary") {
			t.Errorf("%s: %s is not a metric kmirror exports", where, n)
		}
	}
}

func checkMetricsDocs(t *testing.T, types map[string]string) {
	t.Helper()
	raw, err := os.ReadFile("../../docs/alerts.yml")
	if err != nil {
		t.Fatal(err)
	}
	var rules ruleFile
	dec := yaml.NewDecoder(bytes.NewReader(raw))
	dec.KnownFields(true)
	if err := dec.Decode(&rules); err != nil {
		t.Fatalf("docs/alerts.yml: %v", err)
	}
	if len(rules.Groups) == 0 {
		t.Fatal("docs/alerts.yml: no rule groups")
	}
	var alerts []string
	for _, g := range rules.Groups {
		if g.Name == "" || len(g.Rules) == 0 {
			t.Errorf("docs/alerts.yml: group %q is unnamed or empty", g.Name)
		}
		for _, r := range g.Rules {
			where := "docs/alerts.yml " + r.Alert + r.Record
			if (r.Alert == "") == (r.Record == "") {
				t.Errorf("%s: a rule is either an alert or a recording rule", where)
			}
			if slices.Contains(alerts, r.Alert) {
				t.Errorf("%s: duplicate alert", where)
			}
			alerts = append(alerts, r.Alert)
			if s := r.Labels["severity"]; s != "critical" && s != "warning" {
				t.Errorf("%s: severity %q, want critical or warning", where, s)
			}
			if r.Annotations["summary"] == "" {
				t.Errorf("%s: no summary", where)
			}
			for k, text := range r.Annotations {
				// Prometheus expands annotations as text/template with
				// these definitions ahead of the text.
				defs := "{{$labels := .Labels}}{{$externalLabels := .ExternalLabels}}{{$value := .Value}}"
				if _, err := template.New(k).Option("missingkey=zero").Parse(defs + text); err != nil {
					t.Errorf("%s: annotation %s: %v", where, k, err)
				}
			}
			checkExpr(t, where, r.Expr, types)
		}
	}
	for _, want := range []string{"KmirrorPartitionsFailed", "KmirrorLagGrowing", "KmirrorNotMirroring"} {
		if !slices.Contains(alerts, want) {
			t.Errorf("docs/alerts.yml lacks %s", want)
		}
	}

	raw, err = os.ReadFile("../../docs/grafana-dashboard.json")
	if err != nil {
		t.Fatal(err)
	}
	var d dashboard
	if err := json.Unmarshal(raw, &d); err != nil {
		t.Fatalf("docs/grafana-dashboard.json: %v", err)
	}
	if d.Title == "" || d.UID == "" || len(d.Panels) == 0 {
		t.Fatalf("docs/grafana-dashboard.json: title %q, uid %q, %d panels", d.Title, d.UID, len(d.Panels))
	}
	vars := map[string]bool{}
	for _, v := range d.Templating.List {
		vars[v.Name] = true
		if v.Type == "query" {
			checkExpr(t, "dashboard variable "+v.Name, v.Definition, types)
		}
	}
	ids := map[int]bool{}
	varRef := regexp.MustCompile(`\$\{?(\w+)`)
	for _, p := range d.Panels {
		where := "dashboard panel " + p.Title
		if ids[p.ID] || p.ID == 0 {
			t.Errorf("%s: id %d missing or repeated", where, p.ID)
		}
		ids[p.ID] = true
		if p.GridPos.W <= 0 || p.GridPos.X+p.GridPos.W > 24 || p.GridPos.H <= 0 {
			t.Errorf("%s: gridPos %+v outside Grafana's 24 columns", where, p.GridPos)
		}
		if len(p.Targets) == 0 {
			t.Errorf("%s: no query", where)
		}
		for _, q := range p.Targets {
			for _, m := range varRef.FindAllStringSubmatch(q.Expr, -1) {
				if !vars[m[1]] && !strings.HasPrefix(m[1], "__") {
					t.Errorf("%s: unknown variable $%s", where, m[1])
				}
			}
			checkExpr(t, where, q.Expr, types)
		}
	}
}
