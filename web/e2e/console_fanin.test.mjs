// Browser tests of the console for fan-in (issue 30): a mirror whose
// topic.name.prefix writes each source topic under another name on the
// destination (orders → east.orders). Wherever the console names such a
// topic it shows both names; for a mirror without a prefix it shows the
// name once, as before. Run by TestConsoleFanInBrowser (cmd/kmirror)
// against a real server with a kfake source (demo traffic on orders and
// payments) and a kfake destination. The tests run in order: each
// continues from the state the last one left.
//
// Environment: KMIRROR_URL, KMIRROR_ADMIN_TOKEN, KMIRROR_SOURCE and
// KMIRROR_DESTINATION (bootstrap servers), and KMIRROR_SCREENSHOTS (a
// directory; screenshots are saved there as fanin-*.png).

import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
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
    // The browser's notes on the 409s these tests provoke are not errors.
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

async function shot(name, { fullPage = true } = {}) {
  if (!shots) return;
  mkdirSync(shots, { recursive: true });
  await page.evaluate(() => { document.getElementById('toast').hidden = true; });
  await page.screenshot({ path: path.join(shots, `${name}.png`), fullPage });
}

async function shotOf(locator, name) {
  if (!shots) return;
  mkdirSync(shots, { recursive: true });
  await locator.screenshot({ path: path.join(shots, `${name}.png`) });
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
  while (Date.now() < end) {
    if (await fn()) return;
    await new Promise((r) => setTimeout(r, 250));
  }
  assert.fail(`timed out after ${timeout} ms waiting for ${what}`);
}

const text = (s) => s.replace(/\s+/g, ' ').trim();
const topicItem = (topic) => page.locator(`li.topic[data-topic="${topic}"]`);
const dialog = () => page.getByRole('dialog');
const cellTexts = (rows) => rows.evaluateAll((trs) => trs.map((tr) => [...tr.cells].map((c) => c.innerText.replace(/\s+/g, ' ').trim())));

async function waitedFor(dlg, target) {
  const list = dlg.getByRole('list', { name: `Partitions ${target} per topic` });
  await list.waitFor(LONG);
  return (await list.locator('li').allInnerTexts()).map(text);
}

test('create a mirror with a topic name prefix: its page says so', async () => {
  await page.getByRole('link', { name: 'New mirror' }).click();
  await page.getByLabel('Name', { exact: true }).fill('east');
  await page.getByLabel('Source bootstrap servers').fill(env('KMIRROR_SOURCE'));
  await page.getByLabel('Topic name prefix (optional)').fill('east.');
  await axeCheck('the new-mirror form with a prefix');
  await shot('fanin-new-mirror-desktop');
  await page.getByRole('button', { name: 'Check connection' }).click();
  await page.getByText('The source answered and mirror east is valid').waitFor(LONG);
  await page.getByRole('button', { name: 'Create mirror' }).click();
  await page.waitForURL(/#\/mirrors\/east$/);
  await page.getByRole('heading', { name: 'east', level: 1 }).waitFor();
  const fact = page.locator('.facts div', { hasText: 'Topic name prefix' });
  assert.equal(text(await fact.innerText()), 'Topic name prefix east.');
  const m = (await api('GET', '/v1/mirrors/east')).body;
  assert.equal(m.config['topic.name.prefix'], 'east.');
});

test('the add preview has a destination column, and the report names both', async () => {
  await page.getByRole('button', { name: 'Add topics…' }).click();
  const dlg = dialog();
  await dlg.getByLabel('Topic pattern').fill('orders');
  await dlg.getByRole('button', { name: 'Preview matches' }).click();
  await dlg.getByText('1 source topic(s), 3 partition(s) match.').waitFor(LONG);
  const matches = dlg.getByRole('region', { name: 'Matching topics' });
  assert.deepEqual((await matches.locator('thead th').allInnerTexts()).map(text), ['Source topic', 'Destination topic', 'Partitions']);
  assert.deepEqual(await cellTexts(matches.locator('tbody tr')), [['orders', 'east.orders', '3']]);
  await axeCheck('the add preview of a prefixed mirror');
  await shotOf(dlg, 'fanin-add-preview-desktop');
  await page.setViewportSize(PHONE);
  const [scroll, client] = await matches.evaluate((el) => [el.scrollWidth, el.clientWidth]);
  assert.ok(scroll <= client, `the matches scroll sideways at phone width: ${scroll} px in ${client}`);
  await shotOf(dlg, 'fanin-add-preview-phone');
  await page.setViewportSize(DESKTOP);

  await dlg.getByRole('button', { name: 'Add 1 topic(s)' }).click();
  await dlg.getByText('Added 1 topic(s) to east: orders → east.orders.').waitFor(LONG);
  assert.deepEqual(await waitedFor(dlg, 'MIRRORING'), ['3/3 MIRRORING orders → east.orders']);
  await shotOf(dlg, 'fanin-add-waited-desktop');
  await dlg.getByRole('button', { name: 'Close' }).click();
  await topicItem('orders').waitFor(LONG);
});

test('the topic list and the partition table name the destination topic, which holds the copy', async () => {
  const item = topicItem('orders');
  const toggle = item.getByRole('button', { name: 'orders → east.orders', exact: true });
  await toggle.click();
  const table = item.getByRole('region', { name: 'Partitions of orders → east.orders' });
  await table.waitFor(LONG);
  const heads = (await table.locator('thead th').allInnerTexts()).map(text);
  assert.deepEqual(heads.slice(0, 3), ['Partition', 'Source offset orders', 'Destination offset east.orders']);
  await waitFor('every partition of orders MIRRORING with lag 0 and records copied', async () => {
    const rows = await cellTexts(table.locator('tbody tr'));
    return rows.length === 3 && rows.every((c) => c[4] === 'MIRRORING' && c[3] === '0' && Number(c[2].replace(/\D/g, '')) > 0);
  });
  // The copy is in east.orders on the destination, not in orders.
  const meta = execFileSync('kcat', ['-b', env('KMIRROR_DESTINATION'), '-L', '-t', 'east.orders'], { encoding: 'utf8', timeout: 20_000 });
  assert.match(meta, /topic "east\.orders" with 3 partitions/);
  // The charts of the open topic say whose they are.
  await item.getByText('Lag of orders → east.orders', { exact: true }).waitFor();
  // The filter finds a topic by either name.
  const filter = page.getByLabel('Filter', { exact: true });
  await filter.fill('east.ord');
  await item.waitFor();
  await filter.fill('');
  await filter.blur();
  // The screenshots show the copy flowing: the demo writes 5 records/s.
  await waitFor('a records/s above 0 for orders', async () => /Rate [1-9]/.test(text(await item.locator('.topic-facts').innerText())));

  await axeCheck('the mirror page of a prefixed mirror');
  await page.emulateMedia({ colorScheme: 'dark' });
  await axeCheck('the mirror page of a prefixed mirror, dark theme');
  await page.emulateMedia({ colorScheme: 'light' });
  await shot('fanin-mirror-desktop');
  await page.setViewportSize(PHONE);
  await axeCheck('the mirror page of a prefixed mirror at phone width');
  const [scroll, client] = await page.evaluate(() => [document.documentElement.scrollWidth, document.documentElement.clientWidth]);
  assert.ok(scroll <= client, `the page scrolls sideways at phone width: ${scroll} px in ${client}`);
  await shot('fanin-mirror-phone');
  await shotOf(item, 'fanin-topic-phone');
  await page.setViewportSize(DESKTOP);
});

test('the translator answers in the destination topic', async () => {
  const form = page.locator('form.translate');
  const topic = form.getByLabel('Topic');
  assert.deepEqual((await topic.locator('option').allInnerTexts()).map(text), ['orders → east.orders']);
  await topic.selectOption('orders');
  await form.getByLabel('Partition').fill('0');
  await form.getByLabel('Source offset').fill('1');
  await form.getByRole('button', { name: 'Translate' }).click();
  await form.getByText(/^Source offset 1 of orders\/0 is destination offset 1 of east\.orders\/0 \(exact\)\.$/).waitFor(LONG);
});

test('a failback preview names the destination topic it would continue', async () => {
  await page.getByRole('button', { name: 'Add topics…' }).click();
  const dlg = dialog();
  await dlg.getByLabel('Topic pattern').fill('payments');
  await dlg.getByRole('checkbox', { name: 'Continue what the destination holds (fail back)' }).check();
  await dlg.getByRole('button', { name: 'Preview matches' }).click();
  const plan = dlg.getByRole('region', { name: 'What each partition would do' });
  await plan.waitFor(LONG);
  const rows = await cellTexts(plan.locator('tbody tr'));
  assert.deepEqual(rows.map((r) => r.slice(0, 3)), [
    ['payments → east.payments (new on the destination)', '0', 'copy'],
    ['payments → east.payments (new on the destination)', '1', 'copy'],
  ]);
  assert.equal(await dlg.getByText('null', { exact: true }).count(), 0, 'the preview shows a part left out as "null"');
  await axeCheck('the failback preview of a prefixed mirror');
  await shotOf(dlg, 'fanin-add-continue-desktop');
  await dlg.getByRole('button', { name: 'Cancel' }).click();
});

test('a partition with an error is named by both names', async () => {
  // kfake does not fail: the page's read of the erroring partitions is
  // answered with orders/0 retrying an error, as a partition would be.
  const isErroring = (url) => url.pathname === '/v1/partitions' && url.searchParams.get('erroring') === 'true';
  await page.route(isErroring, async (route) => {
    const url = new URL(route.request().url());
    url.searchParams.delete('erroring');
    const res = await route.fetch({ url: url.toString() });
    const body = await res.json();
    body.partitions = body.partitions.filter((p) => p.topic === 'orders' && p.partition === 0)
      .map((p) => ({ ...p, error: 'produce to the destination: NOT_LEADER_FOR_PARTITION; retrying', retry_attempt: 1 }));
    return fulfill(route, { response: res, json: body });
  });
  try {
    await page.reload();
    const list = page.getByRole('region', { name: 'Partitions with an error' });
    await list.waitFor(LONG);
    assert.equal(text(await list.innerText()), 'MIRRORING orders/0 → east.orders/0: produce to the destination: NOT_LEADER_FOR_PARTITION; retrying (retry 1)');
  } finally {
    await unrouteAll(page);
  }
});

test('another mirror with the same prefix is refused, naming the destination topic and its writer', async () => {
  assert.equal((await api('POST', '/v1/mirrors', {
    name: 'east2', source: { bootstrap_servers: env('KMIRROR_SOURCE') }, config: { 'topic.name.prefix': 'east.' },
  })).status, 201);
  await page.goto(`${base}/#/mirrors/east2`);
  await page.getByText('This mirror has no topics yet').waitFor(LONG);
  await page.getByRole('button', { name: 'Add topics…' }).click();
  const dlg = dialog();
  await dlg.getByLabel('Topic pattern').fill('orders');
  await dlg.getByRole('button', { name: 'Preview matches' }).click();
  const alert = dlg.getByRole('alert');
  await alert.waitFor(LONG);
  assert.match(await alert.innerText(), /east\.orders.*mirror east/);

  // A conflict whose detail does not name the topic is named from its
  // topics: the destination topic and the mirror that writes it.
  const isAdd = (url) => url.pathname === '/v1/mirrors/east2/topics:add';
  await page.route(isAdd, (route) => fulfill(route, {
    status: 409, contentType: 'application/problem+json', body: JSON.stringify({
      type: 'urn:kmirror:problem:conflict', title: 'Conflict', status: 409, detail: 'cannot add',
      topics: [{ topic: 'orders', mirrored_by: 'east', destination_topic: 'east.orders' }],
    }),
  }));
  try {
    await dlg.getByRole('button', { name: 'Preview matches' }).click();
    await alert.getByText('cannot add (destination topic east.orders (for orders) is written by mirror east)').waitFor(LONG);
  } finally {
    await unrouteAll(page);
  }
  await dlg.getByRole('button', { name: 'Cancel' }).click();
});

test('a mirror without a prefix shows each name once, as before', async () => {
  assert.equal((await api('POST', '/v1/mirrors', { name: 'plain', source: { bootstrap_servers: env('KMIRROR_SOURCE') } })).status, 201);
  const added = await api('POST', '/v1/mirrors/plain/topics:add?wait=30s', { topic: 'payments' });
  assert.equal(added.status, 200, JSON.stringify(added.body));
  assert.deepEqual(added.body.matches.map((m) => [m.topic, m.destination_topic]), [['payments', 'payments']]);
  await page.goto(`${base}/#/mirrors/plain`);
  const item = topicItem('payments');
  await item.getByRole('button', { name: 'payments', exact: true }).click();
  const table = item.getByRole('region', { name: 'Partitions of payments' });
  await table.waitFor(LONG);
  assert.deepEqual((await table.locator('thead th').allInnerTexts()).map(text).slice(0, 3), ['Partition', 'Source offset', 'Destination offset']);
  assert.equal(await page.locator('main').getByText('→ payments').count(), 0, 'an unprefixed topic is named twice');
  assert.equal(await page.locator('.facts', { hasText: 'Topic name prefix' }).count(), 0);
  await page.getByRole('button', { name: 'Add topics…' }).click();
  const dlg = dialog();
  await dlg.getByLabel('Topic pattern').fill('orders');
  await dlg.getByRole('button', { name: 'Preview matches' }).click();
  await dlg.getByText('1 source topic(s), 3 partition(s) match.').waitFor(LONG);
  const matches = dlg.getByRole('region', { name: 'Matching topics' });
  assert.deepEqual((await matches.locator('thead th').allInnerTexts()).map(text), ['Topic', 'Partitions']);
  await dlg.getByRole('button', { name: 'Cancel' }).click();
});

test('fail over: the dialog says which destination topic becomes writable, and it is', async () => {
  await page.goto(`${base}/#/mirrors/east`);
  const item = topicItem('orders');
  await item.getByRole('group', { name: 'Actions for orders' }).getByRole('button', { name: 'Remove' }).click();
  const dlg = dialog();
  await dlg.getByText(/so applications can write to the destination topic east\.orders\.$/).waitFor();
  await axeCheck('the failover dialog of a prefixed topic');
  await shotOf(dlg, 'fanin-failover-desktop');
  await dlg.getByLabel('Type orders to confirm').fill('orders');
  await dlg.getByRole('button', { name: 'Fail over' }).click();
  await dlg.getByText('Removed orders from east; once STOPPED, the destination topic east.orders is writable.', { exact: false }).waitFor(LONG);
  assert.deepEqual(await waitedFor(dlg, 'STOPPED'), ['3/3 STOPPED orders → east.orders']);
  await dlg.getByRole('button', { name: 'Close' }).click();
  await item.getByText('STOPPED 3').waitFor(LONG);
  execFileSync('kcat', ['-b', env('KMIRROR_DESTINATION'), '-P', '-t', 'east.orders', '-p', '0'], { input: 'written after failover\n', timeout: 20_000 });
});

test('no page error and no content-policy violation happened', () => {
  assert.deepEqual(pageErrors, []);
});
