// events() against a fake fetch: the corner cases a live server does not
// produce on demand (a character cut between two chunks, a 503 with
// Retry-After, a runtime whose fetch abort does not unblock a read). The
// live server's tests are in events.test.mjs.
import assert from "node:assert/strict";
import { test } from "node:test";

import { events, KmirrorEventStreamError } from "../dist/index.js";

const enc = new TextEncoder();

function message(id, kind, extra = {}) {
  const data = { id, at: "2026-01-02T15:04:05Z", kind, message: `event ${id}`, mirror: "m", ...extra };
  return `id: ${id}\nevent: ${kind}\ndata: ${JSON.stringify(data)}\n\n`;
}

// fakeServer answers each request with the next of answers: a function of
// the request that returns a Response. It records the requests and which
// bodies were cancelled.
function fakeServer(answers) {
  const requests = [];
  const cancelled = [];
  const fetch = async (req) => {
    const i = requests.length;
    requests.push({ url: new URL(req.url), lastEventId: req.headers.get("Last-Event-ID"), auth: req.headers.get("Authorization") });
    const answer = answers[i];
    if (!answer) throw new Error(`unexpected request ${i + 1}`);
    return answer(req, () => cancelled.push(i));
  };
  return { fetch, requests, cancelled };
}

// stream answers 200 with the chunks (strings or bytes), then ends, or,
// with open, stays open without sending more: its fetch signal is ignored,
// as a runtime that does not unblock a read on abort does.
function stream(chunks, { open = false } = {}) {
  return (_req, onCancel) => {
    const body = new ReadableStream({
      start(c) {
        for (const chunk of chunks) c.enqueue(typeof chunk === "string" ? enc.encode(chunk) : chunk);
        if (!open) c.close();
      },
      cancel() {
        onCancel();
      },
    });
    return new Response(body, { headers: { "Content-Type": "text/event-stream" } });
  };
}

function problem(status, type, headers = {}) {
  return () =>
    new Response(JSON.stringify({ type, title: type, status, detail: `a ${status}` }), {
      status,
      headers: { "Content-Type": "application/problem+json", ...headers },
    });
}

async function take(it, n) {
  const out = [];
  for await (const e of it) {
    out.push(e);
    if (out.length === n) break;
  }
  return out;
}

test("a character cut between two chunks, the query, the token, Last-Event-ID", async () => {
  const text = message(1, "topics.added", { message: "added ‘bench’ → east.bench" });
  const bytes = enc.encode(text);
  const cut = text.indexOf("‘") + 1; // inside the UTF-8 bytes of ‘ (3 bytes)
  const byteCut = enc.encode(text.slice(0, cut - 1)).length + 1;
  const s = fakeServer([stream([bytes.slice(0, byteCut), bytes.slice(byteCut)], { open: true })]);
  const got = await take(
    events({ baseUrl: "http://kmirror.test", token: "t0k", fetch: s.fetch }, { mirror: "m", actor: "ci", incarnation: "all", lastEventId: 0 }),
    1,
  );
  assert.equal(got[0].message, "added ‘bench’ → east.bench");
  const r = s.requests[0];
  assert.equal(r.url.pathname, "/v1/events");
  assert.deepEqual(Object.fromEntries(r.url.searchParams), { mirror: "m", actor: "ci", incarnation: "all" });
  assert.equal(r.lastEventId, "0");
  assert.equal(r.auth, "Bearer t0k");
  assert.deepEqual(s.cancelled, [0], "break cancelled the stream");
});

test("a dropped connection resumes after the last whole message, which a cut message is not", async () => {
  const third = message(3, "partition.state", { data: { from: "MIRRORING", to: "PAUSED" } });
  const s = fakeServer([
    stream([message(1, "topics.paused") + message(2, "partition.state", { data: {} }) + third.slice(0, 30)]),
    problem(503, "urn:kmirror:problem:database-unavailable", { "Retry-After": "1" }),
    () => {
      throw new TypeError("fetch failed");
    },
    stream([third + "retry: 10\n\n" + message(4, "topics.resumed")]),
    stream([message(5, "topics.removed")]),
  ]);
  const reconnects = [];
  const got = await take(
    events({ baseUrl: "http://kmirror.test", fetch: s.fetch }, { reconnectDelayMs: 20, onReconnect: (r) => reconnects.push(r) }),
    5,
  );
  assert.deepEqual(got.map((e) => e.id), [1, 2, 3, 4, 5]);
  assert.deepEqual(s.requests.map((r) => r.lastEventId), [null, "2", "2", "2", "4"]);
  assert.deepEqual(
    reconnects.map((r) => [r.attempt, r.delayMs, r.lastEventId]),
    [
      [1, 20, "2"],
      [2, 1000, "2"], // the 503's Retry-After
      [3, 80, "2"], // doubled twice
      [1, 10, "4"], // retry: 10 from the stream
    ],
  );
  assert.ok(reconnects[1].error instanceof KmirrorEventStreamError && reconnects[1].error.status === 503);
});

test("kinds: the others are skipped, and their ids still count", async () => {
  const s = fakeServer([
    stream([message(1, "topics.paused") + message(2, "partition.state", { data: { to: "PAUSED" } }) + message(3, "topics.resumed")]),
    stream([message(4, "partition.state", { data: { to: "MIRRORING" } })]),
  ]);
  const got = await take(events({ baseUrl: "http://kmirror.test", fetch: s.fetch }, { kinds: ["partition.state"], reconnectDelayMs: 1 }), 2);
  assert.deepEqual(got.map((e) => [e.id, e.data.to]), [[2, "PAUSED"], [4, "MIRRORING"]]);
  assert.equal(s.requests[1].lastEventId, "3");
});

test("a kind this version does not know is skipped; data that is not an event throws", async () => {
  const s = fakeServer([stream([message(1, "mirror.teleported") + message(2, "topics.added") + "id: 3\ndata: nope\n\n"])]);
  const got = [];
  await assert.rejects(
    (async () => {
      for await (const e of events({ baseUrl: "http://kmirror.test", fetch: s.fetch })) got.push(e.id);
    })(),
    (err) => err instanceof KmirrorEventStreamError && /event 3: the data is not JSON/.test(err.message),
  );
  assert.deepEqual(got, [2]);
});

test("a 401 throws at once, with the problem; a 429 is retried", async () => {
  const s = fakeServer([problem(429, "urn:kmirror:problem:rate-limited"), problem(401, "urn:kmirror:problem:unauthenticated")]);
  await assert.rejects(
    take(events({ baseUrl: "http://kmirror.test", fetch: s.fetch }, { reconnectDelayMs: 1 }), 1),
    (err) => err instanceof KmirrorEventStreamError && err.status === 401 && err.problem?.type === "urn:kmirror:problem:unauthenticated",
  );
  assert.equal(s.requests.length, 2);
});

test("an answer that is not an event stream throws", async () => {
  const s = fakeServer([() => new Response("<html>", { headers: { "Content-Type": "text/html" } })]);
  await assert.rejects(take(events({ baseUrl: "http://kmirror.test", fetch: s.fetch }), 1), /not text\/event-stream/);
});

test("abort while a read waits: the read is cancelled and the loop ends at once, without an error", async () => {
  const s = fakeServer([stream([message(1, "topics.added")], { open: true })]);
  const abort = new AbortController();
  const got = [];
  let aborted = 0;
  const loop = (async () => {
    for await (const e of events({ baseUrl: "http://kmirror.test", fetch: s.fetch }, { signal: abort.signal })) {
      got.push(e.id);
      setTimeout(() => {
        aborted = performance.now();
        abort.abort();
      }, 50); // the generator is then waiting on the open stream
    }
    return performance.now();
  })();
  const ended = await loop;
  assert.deepEqual(got, [1]);
  assert.ok(ended - aborted < 100, `ended ${ended - aborted} ms after the abort`);
  assert.deepEqual(s.cancelled, [0], "the read was cancelled");
});

test("abort while waiting to reconnect ends the loop at once", async () => {
  const s = fakeServer([stream([message(1, "topics.added")])]);
  const abort = new AbortController();
  const started = performance.now();
  const got = await take(
    events({ baseUrl: "http://kmirror.test", fetch: s.fetch }, { signal: abort.signal, reconnectDelayMs: 60_000, onReconnect: () => abort.abort() }),
    2,
  );
  assert.deepEqual(got.map((e) => e.id), [1]);
  assert.ok(performance.now() - started < 1000);
});

test("an aborted signal makes no request", async () => {
  const s = fakeServer([]);
  assert.deepEqual(await take(events({ baseUrl: "http://kmirror.test", fetch: s.fetch }, { signal: AbortSignal.abort() }), 1), []);
  assert.equal(s.requests.length, 0);
});

test("a connection silent past idleTimeoutMs is made again", async () => {
  const s = fakeServer([stream([message(1, "topics.added")], { open: true }), stream([message(2, "topics.removed")], { open: true })]);
  const reconnects = [];
  const got = await take(
    events({ baseUrl: "http://kmirror.test", fetch: s.fetch }, { idleTimeoutMs: 100, reconnectDelayMs: 1, onReconnect: (r) => reconnects.push(r) }),
    2,
  );
  assert.deepEqual(got.map((e) => e.id), [1, 2]);
  assert.match(String(reconnects[0]?.error), /sent nothing for 100 ms/);
  assert.deepEqual(s.cancelled, [0, 1]);
});
