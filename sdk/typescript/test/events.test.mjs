// events() against a live kmirror server, as TestTypeScriptClient
// (cmd/kmirror) runs it: the server, with kfake clusters and PostgreSQL,
// behind the spec-validating proxy, behind a proxy that can drop or stall
// the event streams passing through it (POST /_test/streams:cut?mode=...)
// and lists them (GET /_test/streams).
//
// Environment: KMIRROR_URL (that front proxy), KMIRROR_TOKEN (an admin
// token), KMIRROR_SOURCE (the source cluster's bootstrap servers, with a
// topic "bench" of 3 partitions). Without KMIRROR_URL the tests skip.
import assert from "node:assert/strict";
import { before, test } from "node:test";

import { createKmirrorClient, events, KmirrorEventStreamError } from "../dist/index.js";

const base = process.env.KMIRROR_URL;
const skip = base ? false : "KMIRROR_URL is not set: TestTypeScriptClient (cmd/kmirror) runs these against a live server";
const mirror = "sdk-ts";
const topic = "bench";
const client = base ? createKmirrorClient({ baseUrl: base, token: process.env.KMIRROR_TOKEN }) : undefined;

// lastId is the newest event id the tests have seen.
let lastId = 0;

before(async () => {
  if (skip) return;
  const created = await client.POST("/v1/mirrors", {
    body: { name: mirror, source: { bootstrap_servers: process.env.KMIRROR_SOURCE ?? "" } },
  });
  assert.equal(created.response.status, 201, JSON.stringify(created.error));
  await act("add", "MIRRORING");
});

// act runs a topic action and waits until every partition is in state.
async function act(action, state) {
  const { data, error } = await client.POST(`/v1/mirrors/{mirror}/topics:${action}`, {
    params: { path: { mirror }, query: { wait: "60s" } },
    body: action === "add" ? { topic, replication_factor: -1 } : { topic },
  });
  assert.ok(data?.wait?.completed, `${action}: ${JSON.stringify(data ?? error)}`);
  assert.equal(data.wait.topics[0]?.target_state, state);
}

// streams lists the event streams the front proxy passed, oldest first.
async function streams() {
  const res = await fetch(`${base}/_test/streams`);
  assert.equal(res.status, 200);
  return res.json();
}

// streamsUntil polls the list until ok(list), for at most 5 s.
async function streamsUntil(ok, what) {
  const deadline = Date.now() + 5000;
  for (;;) {
    const list = await streams();
    if (ok(list)) return list;
    if (Date.now() > deadline) assert.fail(`the front proxy's streams: not ${what} after 5 s: ${JSON.stringify(list)}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

const openStreams = (list) => list.filter((s) => s.open).length;

async function cutStreams(mode) {
  const res = await fetch(`${base}/_test/streams:cut?mode=${mode}`, { method: "POST" });
  assert.equal(res.status, 204, `cut: ${res.status} ${await res.text()}`);
}

// reader pulls events from an events() iterator into got, until a
// condition holds.
function reader(iterable) {
  const it = iterable[Symbol.asyncIterator]();
  const got = [];
  return {
    got,
    async until(ok, what) {
      while (!ok(got)) {
        const r = await it.next();
        if (r.done) assert.fail(`the events ended before ${what}; got ${ids(got)}`);
        got.push(r.value);
      }
    },
    stop: () => it.return(),
  };
}

const ids = (list) => list.map((e) => e.id).join(",");

// partitionsIn counts the partitions of the topic that events entered
// state in.
function partitionsIn(list, state) {
  const parts = new Set();
  for (const e of list) {
    if (e.kind === "partition.state" && e.data.topic === topic && e.data.to === state) parts.add(e.data.partition);
  }
  return parts.size;
}

test("typed events; a connection cut mid-message resumes with Last-Event-ID, no event lost or repeated", { skip }, async () => {
  const abort = new AbortController();
  const guard = setTimeout(() => abort.abort(), 120_000);
  const reconnects = [];
  const r = reader(
    events(client, {
      mirror,
      lastEventId: 0,
      signal: abort.signal,
      reconnectDelayMs: 100,
      onReconnect: (info) => reconnects.push({ ...info, yielded: r.got.length }),
    }),
  );
  try {
    // From the first event: the mirror's creation, then its topic's.
    await r.until((got) => partitionsIn(got, "MIRRORING") === 3, "3 partitions MIRRORING");
    assert.equal(r.got[0].kind, "mirror.created");
    assert.ok(r.got.some((e) => e.kind === "topics.added" && e.mirror === mirror && e.actor !== undefined));

    // Cut the stream in the middle of the next message, then pause.
    await cutStreams("mid-message");
    const paused = r.got.length;
    await act("pause", "PAUSED");
    await r.until((got) => {
      const after = got.slice(paused);
      return after.some((e) => e.kind === "topics.paused") && partitionsIn(after, "PAUSED") === 3;
    }, "topics.paused and 3 partitions PAUSED");
    const resumed = r.got.length;
    await act("resume", "MIRRORING");
    await r.until((got) => {
      const after = got.slice(resumed);
      return after.some((e) => e.kind === "topics.resumed") && partitionsIn(after, "MIRRORING") === 3;
    }, "topics.resumed and 3 partitions MIRRORING");

    // Typed by kind: a state change's details are there, as the spec says.
    for (const e of r.got) {
      assert.equal(typeof e.id, "number");
      assert.equal(typeof e.message, "string");
      if (e.kind === "partition.state") {
        const d = e.data;
        assert.ok(d.mirror === mirror && d.topic === topic && d.partition === e.partition, JSON.stringify(e));
        assert.ok(d.from !== d.to && d.epoch > 0 && (d.owner === null || typeof d.owner === "string"), JSON.stringify(e));
        assert.ok(e.message.includes(`${d.from} → ${d.to}`), e.message);
      } else if (e.kind !== "partition.owner" && e.kind !== "partition.realigned") {
        assert.equal(e.data, undefined, `a ${e.kind} event has no data`);
      }
    }

    // One reconnect, after the last whole message, with its id.
    assert.equal(reconnects.length, 1, JSON.stringify(reconnects));
    const [rc] = reconnects;
    const before = r.got[rc.yielded - 1];
    assert.equal(rc.lastEventId, String(before.id));
    const list = await streams();
    assert.equal(list.length, 2, JSON.stringify(list));
    assert.equal(list[0].cut, "mid-message");
    assert.equal(list[1].last_event_id, String(before.id), "the second connection's Last-Event-ID");
    // The message cut in half came again, whole, first on the new connection.
    assert.equal(String(r.got[rc.yielded].id), list[0].cut_message_id);
    console.log(
      `cut in the middle of event ${list[0].cut_message_id}, reconnected with Last-Event-ID ${list[1].last_event_id}; ` +
        `${r.got.length} events: ${ids(r.got)}`,
    );

    // Nothing lost, nothing repeated: the same ids as one uncut read.
    const ordered = r.got.every((e, i) => i === 0 || e.id > r.got[i - 1].id);
    assert.ok(ordered, `ids not increasing: ${ids(r.got)}`);
    lastId = r.got.at(-1).id;
    const ref = reader(events(client, { mirror, lastEventId: 0, signal: abort.signal }));
    await ref.until((got) => got.at(-1)?.id >= lastId, `event ${lastId}`);
    await ref.stop();
    assert.equal(ids(r.got), ids(ref.got));
  } finally {
    clearTimeout(guard);
    await r.stop();
  }
  await streamsUntil((list) => openStreams(list) === 0, "all closed");
});

test("a stalled connection is given up after idleTimeoutMs and made again", { skip }, async () => {
  const abort = new AbortController();
  const guard = setTimeout(() => abort.abort(), 120_000);
  const reconnects = [];
  const before = (await streams()).length;
  const lastIdBefore = lastId;
  const r = reader(
    events(client, {
      mirror,
      lastEventId: lastId,
      signal: abort.signal,
      idleTimeoutMs: 1500,
      reconnectDelayMs: 100,
      onReconnect: (info) => reconnects.push(info),
    }),
  );
  try {
    const first = r.until((got) => partitionsIn(got, "PAUSED") === 3 && partitionsIn(got, "MIRRORING") === 3, "a pause and a resume");
    await streamsUntil((list) => list.length > before && list.at(-1).open, "the stream open");
    await cutStreams("stall");
    await act("pause", "PAUSED");
    await act("resume", "MIRRORING");
    await first;
    // Each reconnect was for silence (the stream is idle until the pause,
    // so a slow start may add one before the stall), after no event.
    assert.ok(reconnects.length >= 1, "no reconnect");
    for (const rc of reconnects) {
      assert.match(String(rc.error), /sent nothing for 1500 ms/);
      assert.equal(rc.lastEventId, String(lastId), "nothing passed the stalled connection");
    }
    assert.equal(r.got[0].kind, "topics.paused");
    const ordered = r.got.every((e, i) => e.id > (i === 0 ? lastId : r.got[i - 1].id));
    assert.ok(ordered, `ids not increasing from ${lastId}: ${ids(r.got)}`);
    lastId = r.got.at(-1).id;
  } finally {
    clearTimeout(guard);
    await r.stop();
  }
  const list = (await streamsUntil((l) => openStreams(l) === 0, "all closed")).slice(before);
  const stalled = list.findIndex((s) => s.cut === "stall");
  assert.ok(stalled >= 0 && list[stalled + 1]?.last_event_id === String(lastIdBefore), JSON.stringify(list));
});

test("abort ends the loop within 1 s, cancelling the pending read, without an error", { skip }, async () => {
  const abort = new AbortController();
  let abortedAt = 0;
  const before = (await streams()).length;
  const seen = [];
  // One event is replayed; once the loop has it, the generator waits on
  // a read of the idle stream (the server sends a keep-alive every 15 s),
  // and the abort comes 200 ms later.
  for await (const e of events(client, { mirror, lastEventId: lastId - 1, signal: abort.signal })) {
    seen.push(e.id);
    setTimeout(() => {
      abortedAt = performance.now();
      abort.abort();
    }, 200);
  }
  const took = performance.now() - abortedAt;
  console.log(`the loop ended ${took.toFixed(1)} ms after the abort`);
  assert.deepEqual(seen, [lastId]);
  assert.ok(took < 1000, `the loop ended ${took} ms after the abort`);
  await streamsUntil((list) => list.length === before + 1 && openStreams(list) === 0, "the stream closed");
});

test("leaving the loop cancels the stream; kinds filters and types", { skip }, async () => {
  const before = (await streams()).length;
  const states = [];
  for await (const e of events(client, { mirror, lastEventId: 0, kinds: ["partition.state"] })) {
    assert.equal(e.kind, "partition.state");
    states.push(e.data.to);
    if (states.length === 3) break;
  }
  assert.equal(states.length, 3);
  const started = performance.now();
  await streamsUntil((list) => list.length === before + 1 && openStreams(list) === 0, "the stream closed");
  console.log(`after break, the front proxy saw the stream close within ${(performance.now() - started).toFixed(1)} ms`);
});

test("a refused request throws a KmirrorEventStreamError at once, not retried", { skip }, async () => {
  const before = (await streams()).length;
  await assert.rejects(
    async () => {
      for await (const _ of events({ baseUrl: base, token: "not-a-token" }, { mirror })) assert.fail("an event");
    },
    (err) => err instanceof KmirrorEventStreamError && err.status === 401 && err.problem?.type === "urn:kmirror:problem:unauthenticated",
  );
  await assert.rejects(
    async () => {
      for await (const _ of events(client, { incarnation: 1 })) assert.fail("an event");
    },
    (err) => err instanceof KmirrorEventStreamError && err.status === 400 && err.problem?.type === "urn:kmirror:problem:validation",
  );
  assert.equal((await streams()).length, before, "no stream was opened");
});
