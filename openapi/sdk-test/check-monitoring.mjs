// Parses kmirror's shipped monitoring examples with real parsers:
// docs/alerts.yml with the yaml package (duplicate keys and any YAML error
// fail) and its structure checked against Prometheus's rule file format, and
// every PromQL expression (each rule's expr, each dashboard target and
// query variable in docs/grafana-dashboard.json) with
// @prometheus-io/lezer-promql, the grammar of Prometheus's own web UI: any
// error node fails. The grammar checks syntax, not types (a range vector
// where an instant one is wanted still parses). Run by
// TestMonitoringExamplesParse (cmd/kmirror):
//
//   node check-monitoring.mjs ../../docs/alerts.yml ../../docs/grafana-dashboard.json

import { readFileSync } from 'node:fs';
import { parser } from '@prometheus-io/lezer-promql';
import { parseDocument } from 'yaml';

const [rulesPath, dashboardPath] = process.argv.slice(2);
if (!rulesPath || !dashboardPath) {
  console.error('usage: node check-monitoring.mjs RULES.yml DASHBOARD.json');
  process.exit(2);
}
const problems = [];
const fail = (where, msg) => problems.push(`${where}: ${msg}`);

// promqlErrors returns where the parser found errors in expr: each error
// node's offset with the text around it.
function promqlErrors(expr) {
  const out = [];
  parser.parse(expr).iterate({
    enter(node) {
      if (node.type.isError) out.push(`error at ${node.from}: …${expr.slice(Math.max(0, node.from - 15), node.from + 15)}…`);
    },
  });
  return out;
}

function checkPromQL(where, expr) {
  if (typeof expr !== 'string' || !expr.trim()) return fail(where, 'no expression');
  for (const e of promqlErrors(expr)) fail(where, `PromQL ${e} in ${JSON.stringify(expr)}`);
}

// The checker must see a broken expression, or it proves nothing.
for (const bad of ['sum(rate(kmirror_x[5m])', 'kmirror_x{state="FAILED"} >', 'max by (mirror topic) (kmirror_x)']) {
  if (promqlErrors(bad).length === 0) fail('self-check', `the PromQL parser accepted ${JSON.stringify(bad)}`);
}

// Prometheus's rule file format (rulefmt): the keys each level may have.
const DURATION = /^(\d+(ms|s|m|h|d|w|y))+$/;
const GROUP_KEYS = new Set(['name', 'interval', 'limit', 'query_offset', 'labels', 'rules']);
const RULE_KEYS = new Set(['alert', 'record', 'expr', 'for', 'keep_firing_for', 'labels', 'annotations']);
const isObject = (v) => v !== null && typeof v === 'object' && !Array.isArray(v);
const stringMap = (v) => isObject(v) && Object.values(v).every((s) => typeof s === 'string');

let rules = 0;
{
  const doc = parseDocument(readFileSync(rulesPath, 'utf8'), { uniqueKeys: true, prettyErrors: true });
  for (const e of [...doc.errors, ...doc.warnings]) fail(rulesPath, `YAML: ${e.message}`);
  const file = doc.toJS();
  if (!isObject(file) || !Array.isArray(file.groups) || Object.keys(file).some((k) => k !== 'groups')) {
    fail(rulesPath, 'want a mapping with only groups, a list');
  }
  for (const [gi, g] of (file?.groups ?? []).entries()) {
    const gw = `${rulesPath} group ${g?.name ?? gi}`;
    if (!isObject(g) || typeof g.name !== 'string' || !Array.isArray(g.rules)) { fail(gw, 'want name and rules'); continue; }
    for (const k of Object.keys(g)) if (!GROUP_KEYS.has(k)) fail(gw, `unknown key ${k}`);
    if (g.interval !== undefined && !DURATION.test(g.interval)) fail(gw, `interval ${g.interval} is not a duration`);
    for (const r of g.rules) {
      const rw = `${gw} rule ${r?.alert ?? r?.record}`;
      rules++;
      if (!isObject(r)) { fail(rw, 'not a mapping'); continue; }
      for (const k of Object.keys(r)) if (!RULE_KEYS.has(k)) fail(rw, `unknown key ${k}`);
      if ((typeof r.alert === 'string') === (typeof r.record === 'string')) fail(rw, 'want exactly one of alert and record');
      for (const k of ['for', 'keep_firing_for']) if (r[k] !== undefined && !DURATION.test(r[k])) fail(rw, `${k} ${r[k]} is not a duration`);
      for (const k of ['labels', 'annotations']) if (r[k] !== undefined && !stringMap(r[k])) fail(rw, `${k} must map strings to strings`);
      checkPromQL(rw, r.expr);
    }
  }
  if (rules === 0) fail(rulesPath, 'no rules');
}

// Grafana's variables are not PromQL: the interval ones become durations
// and the others (used inside label matcher strings) a plain value.
const grafanaToPromQL = (expr) => expr
  .replace(/\$\{?__(rate_interval|interval|range)\}?/g, '5m')
  .replace(/\$\{?\w+(:\w+)?\}?/g, 'x');

let targets = 0;
{
  let d;
  try {
    d = JSON.parse(readFileSync(dashboardPath, 'utf8'));
  } catch (err) {
    fail(dashboardPath, `JSON: ${err.message}`);
  }
  for (const v of d?.templating?.list ?? []) {
    if (v.type !== 'query') continue;
    // label_values(selector, label) is Grafana's; its selector is PromQL.
    const m = /^label_values\((.+),\s*\w+\)$/.exec(v.definition ?? '');
    targets++;
    if (!m) fail(`${dashboardPath} variable ${v.name}`, `not label_values(selector, label): ${v.definition}`);
    else checkPromQL(`${dashboardPath} variable ${v.name}`, grafanaToPromQL(m[1]));
  }
  const panels = (d?.panels ?? []).flatMap((p) => [p, ...(p.panels ?? [])]);
  for (const p of panels) {
    for (const t of p.targets ?? []) {
      targets++;
      checkPromQL(`${dashboardPath} panel ${p.title} ${t.refId}`, grafanaToPromQL(t.expr ?? ''));
    }
  }
  if (targets === 0) fail(dashboardPath, 'no queries');
}

if (problems.length) {
  console.error(problems.join('\n'));
  process.exit(1);
}
console.log(`parsed ${rules} rule expression(s) in ${rulesPath} and ${targets} query expression(s) in ${dashboardPath}: no error`);
