// Browser tests of the console's Schemas panel (issue 47): a mirror that
// names a source Schema Registry shows its Schema Registry sync on its
// page, the source registry, the last pass and its last success, and each
// subject copied into the destination registry with its mode. Run by
// TestConsoleSchemasBrowser (cmd/kmirror) against a real server with a
// kfake source (demo traffic on orders and payments), a kfake destination
// and two in-memory registries: the source one holds orders-value (two
// versions) and payments-value. The tests run in order: each continues
// from the state the last one left.
//
// Environment: KMIRROR_URL, KMIRROR_ADMIN_TOKEN, KMIRROR_SOURCE (bootstrap
// servers), KMIRROR_SOURCE_REGISTRY and KMIRROR_DESTINATION_REGISTRY (base
// URLs), and KMIRROR_SCREENSHOTS (a directory; screenshots are saved there
// as schemas-*.png).

import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { mkdirSync } from 'node:fs';
import path from 'node:path';
import { env, base, shots, axeSource, DESKTOP, PHONE, LONG, launch, fulfill, unrouteAll } from './harness.mjs';

let browser;
let page;
const pageErrors = [];

before(async () => {
  browser = await launch();
  const ctx = await browser.newContext({ viewport: DESKTOP });
  page = await ctx.newPage();
  page.on('pageerror', (err) => pageErrors.push(`page error: ${err.message}`));
  page.on('console', (msg) => {
    if (msg.type() === 'error' && !/status of 4\d\d/.test(msg.text())) pageErrors.push(`console: ${msg.text()}`);
  });
  await page.goto(`${base}/#/`);
  await page.getByLabel('API token').fill(env('KMIRROR_ADMIN_TOKEN'));
  await page.getByRole('button', { name: 'Sign in' }).click();
  await page.getByRole('heading', { name: 'Mirrors' }).waitFor(LONG);
});

after(async () => {
  await browser?.close();
});

// shotOf saves the part of the page locator shows. The page is clipped
// to where it is, not asked for the element: the panel is drawn again on
// each refresh, and an element screenshot fails when its element goes.
async function shotOf(locator, name) {
  if (!shots) return;
  mkdirSync(shots, { recursive: true });
  await page.evaluate(() => { document.getElementById('toast').hidden = true; });
  // A refresh may replace the element between two steps: try again, up
  // to a few times, on the element drawn anew.
  for (let attempt = 1; ; attempt++) {
    try {
      await locator.scrollIntoViewIfNeeded({ timeout: 2000 });
      const clip = await locator.boundingBox();
      await page.screenshot({ path: path.join(shots, `${name}.png`), clip });
      return;
    } catch (err) {
      if (attempt >= 5) throw err;
    }
  }
}

async function axeCheck(what) {
  await page.evaluate(axeSource);
  const res = await page.evaluate(async () => {
    // eslint-disable-next-line no-undef
    const r = await axe.run(document, { resultTypes: ['violations'] });
    return r.violations.map((v) => ({ id: v.id, impact: v.impact, help: v.help, nodes: v.nodes.slice(0, 3).map((n) => n.target.join(' ')) }));
  });
  const bad = res.filter((v) => v.impact === 'serious' || v.impact === 'critical');
  assert.deepEqual(bad, [], `${what}: axe found serious or critical violations:\n${JSON.stringify(bad, null, 2)}`);
}

// api calls the server as another client would.
async function api(method, url, body) {
  const res = await fetch(`${base}${url}`, {
    method, body: body === undefined ? undefined : JSON.stringify(body),
    headers: { Authorization: `Bearer ${env('KMIRROR_ADMIN_TOKEN')}`, 'Content-Type': 'application/json' },
  });
  return { status: res.status, body: await res.json().catch(() => null) };
}

// waitFor polls fn until it returns a truthy value or the deadline passes.
async function waitFor(what, fn, timeout = 30_000) {
  const end = Date.now() + timeout;
  let last;
  while (Date.now() < end) {
    last = await fn();
    if (last) return;
    await new Promise((r) => setTimeout(r, 250));
  }
  assert.fail(`timed out after ${timeout} ms waiting for ${what}`);
}

const text = (s) => s.replace(/\s+/g, ' ').trim();
const panel = () => page.getByRole('region', { name: 'Schemas', exact: true });
const subjects = (mirror) => panel().getByRole('region', { name: `Schema subjects of ${mirror}` });
const cellTexts = (rows) => rows.evaluateAll((trs) => trs.map((tr) => [...tr.cells].map((c) => c.innerText.replace(/\s+/g, ' ').trim())));
const fact = (name) => panel().locator('.facts div', { has: page.locator('dt', { hasText: name }) }).locator('dd');

test('the new-mirror form sends the source Schema Registry', async () => {
  await page.getByRole('link', { name: 'New mirror' }).click();
  await page.getByLabel('Name', { exact: true }).fill('east');
  await page.getByLabel('Source bootstrap servers').fill(env('KMIRROR_SOURCE'));
  await page.getByLabel('Topic name prefix (optional)').fill('east.');
  await page.getByLabel('Schema Registry URLs').fill(env('KMIRROR_SOURCE_REGISTRY'));
  // The in-memory registry takes any credentials.
  await page.getByLabel('Registry user (optional)').fill('kmirror-east');
  await page.getByLabel('Registry password').fill('s3cret');
  await axeCheck('the new-mirror form with a source registry');
  await page.getByRole('button', { name: 'Check connection' }).click();
  await page.getByText('The source answered and mirror east is valid').waitFor(LONG);
  await page.getByRole('button', { name: 'Create mirror' }).click();
  await page.waitForURL(/#\/mirrors\/east$/);
  const m = (await api('GET', '/v1/mirrors/east')).body;
  assert.deepEqual(m.source.schema_registry, { urls: [env('KMIRROR_SOURCE_REGISTRY')], basic_auth_username: 'kmirror-east',
    basic_auth_password_set: true, bearer_token_set: false, tls_key_pem_set: false });
  // Passes every second from here, so that the tests do not wait 10 s.
  const patched = await api('PATCH', '/v1/mirrors/east', { config: { 'schema.sync.interval.ms': '1000' } });
  assert.equal(patched.status, 200, JSON.stringify(patched.body));
});

test('before the first pass the panel says what runs it', async () => {
  // The server's first pass comes at once: the page is answered without it.
  const isMirror = (url) => url.pathname === '/v1/mirrors/east';
  await page.route(isMirror, async (route) => {
    const res = await route.fetch();
    const body = await res.json();
    delete body.schema_sync;
    return fulfill(route, { response: res, json: body });
  });
  try {
    await page.reload();
    await panel().getByText('Waiting for the first schema sync (a server with --destination-schema-registry-url runs it).').waitFor(LONG);
    assert.equal(text(await fact('Source registry').innerText()), env('KMIRROR_SOURCE_REGISTRY'));
    await axeCheck('the Schemas panel before the first pass');
  } finally {
    await unrouteAll(page);
  }
});

test('the subjects of the mirrored topics are copied and READONLY', async () => {
  const added = await api('POST', '/v1/mirrors/east/topics:add?wait=30s', { topic: 'orders|payments' });
  assert.equal(added.status, 200, JSON.stringify(added.body));
  await page.reload();
  const table = subjects('east');
  await table.waitFor(LONG);
  assert.deepEqual((await table.locator('thead th').allInnerTexts()).map(text),
    ['Source subject', 'Destination subject', 'Versions', 'Copied by the last pass', 'Mode', 'Error']);
  let rows;
  await waitFor('orders-value and payments-value READONLY on the destination', async () => {
    rows = (await cellTexts(table.locator('tbody tr'))).map((c) => [c[0], c[1], c[2], c[4], c[5]]);
    return rows.length === 2 && rows.every((r) => r[3] === 'READONLY');
  });
  assert.deepEqual(rows, [
    ['orders-value', 'east.orders-value', '2', 'READONLY', ''],
    ['payments-value', 'east.payments-value', '1', 'READONLY', ''],
  ]);
  assert.match(text(await fact('Last schema sync').innerText()), /^OK .+ \(\d+ s ago\)$/);
  assert.match(text(await fact('Last success').innerText()), /\(\d+ s ago\)$/);
  assert.equal(await fact('Last schema sync').locator('time[datetime]').count(), 1);
  assert.equal(text(await fact('Versions').innerText()), '3');
  // The copy is in the destination registry.
  const dst = await (await fetch(`${env('KMIRROR_DESTINATION_REGISTRY')}/subjects`)).json();
  assert.deepEqual(dst.sort(), ['east.orders-value', 'east.payments-value']);

  await axeCheck('the Schemas panel');
  await page.emulateMedia({ colorScheme: 'dark' });
  await axeCheck('the Schemas panel, dark theme');
  await page.emulateMedia({ colorScheme: 'light' });
  await shotOf(panel(), 'schemas-desktop');
  await page.setViewportSize(PHONE);
  await axeCheck('the Schemas panel at phone width');
  const [scroll, client] = await page.evaluate(() => [document.documentElement.scrollWidth, document.documentElement.clientWidth]);
  assert.ok(scroll <= client, `the page scrolls sideways at phone width: ${scroll} px in ${client}`);
  await shotOf(panel(), 'schemas-phone');
  await page.setViewportSize(DESKTOP);
});

test('a removed topic\'s subject turns READWRITE, without a reload', async () => {
  const removed = await api('POST', '/v1/mirrors/east/topics:remove?wait=30s', { topic: 'orders' });
  assert.equal(removed.status, 200, JSON.stringify(removed.body));
  const table = subjects('east');
  await waitFor('orders-value READWRITE and payments-value READONLY', async () => {
    const rows = (await cellTexts(table.locator('tbody tr'))).map((c) => [c[0], c[4]]);
    return JSON.stringify(rows) === JSON.stringify([['orders-value', 'READWRITE'], ['payments-value', 'READONLY']]);
  });
  await axeCheck('the Schemas panel with a READWRITE subject');
  await shotOf(panel(), 'schemas-readwrite-desktop');
});

test('a failing subject stands out with its error', async () => {
  // The in-memory registries do not fail a subject on their own: the
  // page's read is answered with payments-value failing, as a pass reports it.
  const isMirror = (url) => url.pathname === '/v1/mirrors/east';
  await page.route(isMirror, async (route) => {
    const res = await route.fetch();
    const body = await res.json();
    const s = body.schema_sync;
    Object.assign(s, { ok: false, failed: 1 });
    for (const sub of s.subjects) if (sub.source === 'payments-value') sub.error = 'destination registry: register version 1 (id 2): 500 Internal Server Error';
    return fulfill(route, { response: res, json: body });
  });
  try {
    await page.reload();
    const table = subjects('east');
    await table.waitFor(LONG);
    const failed = table.locator('tbody tr.row-failed');
    await failed.waitFor(LONG);
    assert.deepEqual((await cellTexts(failed))[0].slice(0, 1).concat((await cellTexts(failed))[0].slice(5)),
      ['payments-value', 'destination registry: register version 1 (id 2): 500 Internal Server Error']);
    // Failed first.
    assert.equal(text(await table.locator('tbody tr').first().locator('th').innerText()), 'payments-value');
    assert.match(text(await fact('Last schema sync').innerText()), /^failing /);
    await panel().getByText('The last schema sync failed: 1 subject(s) could not be copied, see below.').waitFor();
    await axeCheck('the Schemas panel with a failing subject');
  } finally {
    await unrouteAll(page);
  }
});

test('a pass that fails shows its error in full', async () => {
  // A source registry that nothing listens on: the pass cannot list its
  // subjects, which schema.subjects.include asks it to.
  const created = await api('POST', '/v1/mirrors', {
    name: 'west', source: { bootstrap_servers: env('KMIRROR_SOURCE'), schema_registry: { urls: ['http://127.0.0.1:9'], basic_auth_username: 'kmirror', basic_auth_password: 's3cret' } },
    config: { 'schema.sync.interval.ms': '1000', 'topic.name.prefix': 'west.', 'schema.subjects.include': '.*-value' },
  });
  assert.equal(created.status, 201, JSON.stringify(created.body));
  const added = await api('POST', '/v1/mirrors/west/topics:add?wait=30s', { topic: 'payments' });
  assert.equal(added.status, 200, JSON.stringify(added.body));
  let sync;
  await waitFor('a failed pass with an error', async () => {
    sync = (await api('GET', '/v1/mirrors/west')).body.schema_sync;
    return sync?.error;
  });
  await page.goto(`${base}/#/mirrors/west`);
  const box = panel().locator('.error-box');
  await box.waitFor(LONG);
  // The error names the registry's URL: the same pass's error each time.
  assert.equal(text(await box.innerText()), text(`The last schema sync failed: ${sync.error}`));
  assert.match(text(await fact('Last schema sync').innerText()), /^failing /);
  assert.equal(text(await fact('Last success').innerText()), 'never');
  assert.equal(text(await fact('Signs in as').innerText()), 'kmirror');
  await axeCheck('the Schemas panel of a failing pass');
  await shotOf(panel(), 'schemas-failing-desktop');
});

test('a mirror without a source registry has no Schemas panel', async () => {
  assert.equal((await api('POST', '/v1/mirrors', { name: 'plain', source: { bootstrap_servers: env('KMIRROR_SOURCE') } })).status, 201);
  await page.goto(`${base}/#/mirrors/plain`);
  await page.getByText('This mirror has no topics yet').waitFor(LONG);
  assert.equal(await page.getByRole('heading', { name: 'Schemas' }).count(), 0);
});

test('no page error and no content-policy violation happened', () => {
  assert.deepEqual(pageErrors, []);
});
