// A TypeScript client of kmirror's API, generated from the served spec
// (openapi-typescript writes gen/schema.d.ts; openapi-fetch makes the calls),
// that calls every operation at least once, successes and documented errors.
// TestTypeScriptSDK (cmd/kmirror) type-checks it with tsc --strict and runs
// it against a live server behind a proxy that validates every request and
// response against the spec, so the spec, the types and the server agree.
//
// Environment: KMIRROR_URL (the proxy), KMIRROR_ADMIN_TOKEN and
// KMIRROR_READ_TOKEN (the server's tokens), KMIRROR_SOURCE (the source
// cluster's bootstrap servers, with a topic "bench" of 3 partitions that
// holds records).
import createClient from "openapi-fetch";
import type { components, paths } from "./gen/schema.js";

type Schemas = components["schemas"];
type PartitionState = Schemas["PartitionState"];
type Problem = Schemas["Problem"];

function env(name: string): string {
  const v = process.env[name];
  if (!v) throw new Error(`${name} is not set`);
  return v;
}

const baseUrl = env("KMIRROR_URL");
const source = env("KMIRROR_SOURCE");

// One client per role; none without a token.
const admin = createClient<paths>({ baseUrl, headers: { Authorization: `Bearer ${env("KMIRROR_ADMIN_TOKEN")}` } });
const viewer = createClient<paths>({ baseUrl, headers: { Authorization: `Bearer ${env("KMIRROR_READ_TOKEN")}` } });
const anonymous = createClient<paths>({ baseUrl });

// Requests that break the spec on purpose (a wrong content type, a body too
// large) carry this header, so the validating proxy checks only their answer.
const invalidRequest = { "X-Kmirror-Sdk-Test": "invalid-request" };

function check(cond: boolean, what: string): asserts cond {
  if (!cond) throw new Error(`check failed: ${what}`);
}

// expectProblem checks an error answer: its status and problem type.
function expectProblem(
  what: string,
  res: { error?: Problem | undefined; response: Response },
  status: number,
  type: Problem["type"],
): Problem {
  const p = res.error;
  check(res.response.status === status, `${what}: status ${res.response.status}, want ${status}`);
  check(p !== undefined, `${what}: no problem body`);
  check(p.type === type && p.status === status, `${what}: problem ${JSON.stringify(p)}, want ${type}`);
  check(res.response.headers.get("Content-Type") === "application/problem+json", `${what}: content type`);
  return p;
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

// waitFor polls the describe rows of the mirror's topic until every
// partition is in state, at most 60s.
async function waitFor(mirror: string, topic: string, state: PartitionState): Promise<Schemas["PartitionRow"][]> {
  const deadline = Date.now() + 60_000;
  let rows: Schemas["PartitionRow"][] = [];
  while (Date.now() < deadline) {
    const { data, error } = await admin.GET("/v1/partitions", { params: { query: { mirror, topic, limit: 100 } } });
    check(data !== undefined, `describe: ${JSON.stringify(error)}`);
    rows = data.partitions;
    if (rows.length > 0 && rows.every((r) => r.state === state)) return rows;
    await sleep(200);
  }
  throw new Error(`partitions of ${mirror}/${topic} not all ${state}: ${JSON.stringify(rows.map((r) => r.state))}`);
}

async function main(): Promise<void> {
  const mirror = "sdk";
  const topic = "bench";

  // System: health, the caller, instances.
  {
    const live = await anonymous.GET("/healthz");
    check(live.data?.status === "ok", "healthz");
    const ready = await anonymous.GET("/readyz");
    check(ready.data?.status === "ready", "readyz");

    const me = await admin.GET("/v1/whoami");
    check(me.data?.role === "admin" && me.data.auth_enabled, `whoami admin: ${JSON.stringify(me.data)}`);
    const them = await viewer.GET("/v1/whoami");
    check(them.data?.role === "viewer", "whoami viewer");
    expectProblem("whoami without a token", await anonymous.GET("/v1/whoami"), 401, "urn:kmirror:problem:unauthenticated");

    const { data } = await admin.GET("/v1/instances");
    check(data !== undefined && data.instances.some((i) => i.live && i.leases >= 0), "instances");
    const started: Date = new Date(data.instances[0]?.started_at ?? "");
    check(!Number.isNaN(started.getTime()), "started_at is a date-time");
  }

  // Mirrors: create (dry run, then for real), conflicts, validation.
  {
    const body: Schemas["CreateMirrorRequest"] = {
      name: mirror,
      source: { bootstrap_servers: source, security_protocol: "PLAINTEXT" },
      config: { "mirror.metadata.refresh.interval.ms": "60000" },
    };
    const dry = await admin.POST("/v1/mirrors", { params: { query: { dry_run: true } }, body });
    check(dry.response.status === 200 && dry.data?.name === mirror, "create: dry run");

    const created = await admin.POST("/v1/mirrors", { body });
    check(created.response.status === 201 && created.data !== undefined, `create: ${JSON.stringify(created.error)}`);
    check(created.response.headers.get("Location") === `/v1/mirrors/${mirror}`, "create: Location");
    const m = created.data;
    check(m.source.security_protocol === "PLAINTEXT" && !m.source.sasl_password_set && !m.source.tls_key_set, "create: source");
    check(m.config["mirror.metadata.refresh.interval.ms"] === "60000", "create: config");
    check(m.status.topics === 0 && m.status.partitions === 0, "create: status");

    expectProblem("create again", await admin.POST("/v1/mirrors", { body }), 409, "urn:kmirror:problem:conflict");
    const bad = expectProblem(
      "create a bad name",
      await admin.POST("/v1/mirrors", { body: { ...body, name: "bad name" } }),
      400,
      "urn:kmirror:problem:validation",
    );
    check(bad.errors?.some((e) => e.field === "name") === true, `create a bad name: errors ${JSON.stringify(bad.errors)}`);
    expectProblem(
      "create with the read token",
      await viewer.POST("/v1/mirrors", { body: { ...body, name: "other" } }),
      403,
      "urn:kmirror:problem:forbidden",
    );
  }

  {
    const list = await admin.GET("/v1/mirrors");
    check(list.data?.mirrors.some((m) => m.name === mirror) === true, "list mirrors");
    expectProblem("list without a token", await anonymous.GET("/v1/mirrors"), 401, "urn:kmirror:problem:unauthenticated");

    const got = await admin.GET("/v1/mirrors/{mirror}", { params: { path: { mirror } } });
    check(got.data?.effective_config["mirror.metadata.refresh.interval.ms"] === "60000", "get mirror");
    expectProblem(
      "get an unknown mirror",
      await admin.GET("/v1/mirrors/{mirror}", { params: { path: { mirror: "nope" } } }),
      404,
      "urn:kmirror:problem:not-found",
    );

    // A merge patch: null returns a key to its default.
    const set = await admin.PATCH("/v1/mirrors/{mirror}", {
      params: { path: { mirror } },
      body: { config: { "mirror.metadata.refresh.interval.ms": "10000" } },
    });
    check(set.data?.config["mirror.metadata.refresh.interval.ms"] === "10000", "patch: set");
    const reset = await admin.PATCH("/v1/mirrors/{mirror}", {
      params: { path: { mirror } },
      body: { config: { "mirror.metadata.refresh.interval.ms": null } },
    });
    check(reset.data !== undefined && !("mirror.metadata.refresh.interval.ms" in reset.data.config), "patch: reset");
    expectProblem(
      "patch an unknown field",
      await admin.PATCH("/v1/mirrors/{mirror}", {
        params: { path: { mirror } },
        body: { config: {} },
        bodySerializer: () => JSON.stringify({ colour: "blue" }),
        headers: invalidRequest,
      }),
      400,
      "urn:kmirror:problem:unknown-field",
    );
  }

  // Topics: add (preview, then for real), describe, pause, resume.
  {
    const preview = await admin.POST("/v1/mirrors/{mirror}/topics:add", {
      params: { path: { mirror }, query: { dry_run: true } },
      body: { topic: "ben.*" },
    });
    check(preview.data?.matches?.[0]?.partitions === 3 && preview.data.action === "add", "add: preview");
    expectProblem(
      "add a pattern that matches nothing",
      await admin.POST("/v1/mirrors/{mirror}/topics:add", { params: { path: { mirror } }, body: { topic: "nope.*" } }),
      404,
      "urn:kmirror:problem:no-match",
    );
    // -1: the destination's default replication factor.
    const added = await admin.POST("/v1/mirrors/{mirror}/topics:add", {
      params: { path: { mirror } },
      body: { topic: "ben.*", replication_factor: -1 },
    });
    check(added.data?.topics.join() === topic, `add: ${JSON.stringify(added.error)}`);

    const list = await admin.GET("/v1/mirrors/{mirror}/topics", { params: { path: { mirror } } });
    const t = list.data?.topics[0];
    check(t?.desired_state === "mirroring" && t.replication_factor === -1 && t.partitions === 3, `list topics: ${JSON.stringify(t)}`);

    const rows = await waitFor(mirror, topic, "MIRRORING");
    // A leased partition names its owner; nobody's would be null, never "".
    check(rows.every((r) => r.error === null && r.lease_live && typeof r.owner === "string" && r.owner !== ""),
      `describe: ${JSON.stringify(rows)}`);
    const detail = await admin.GET("/v1/mirrors/{mirror}/topics/{topic}", { params: { path: { mirror, topic } } });
    check(detail.data?.partition_rows.length === 3 && detail.data.states.MIRRORING === 3, "get topic");
    expectProblem(
      "get an unknown topic",
      await admin.GET("/v1/mirrors/{mirror}/topics/{topic}", { params: { path: { mirror, topic: "nope" } } }),
      404,
      "urn:kmirror:problem:not-found",
    );
    expectProblem(
      "describe with a bad limit",
      await admin.GET("/v1/partitions", { params: { query: { limit: 0 } }, headers: invalidRequest }),
      400,
      "urn:kmirror:problem:validation",
    );
    const mirroring = await admin.GET("/v1/partitions", { params: { query: { state: "MIRRORING", limit: 1 } } });
    check(mirroring.data?.partitions.length === 1 && mirroring.data.next_cursor !== undefined, "describe: a page");

    expectProblem(
      "pause with the read token",
      await viewer.POST("/v1/mirrors/{mirror}/topics:pause", { params: { path: { mirror } }, body: { topic } }),
      403,
      "urn:kmirror:problem:forbidden",
    );
    expectProblem(
      "pause, not JSON",
      await admin.POST("/v1/mirrors/{mirror}/topics:pause", {
        params: { path: { mirror } },
        body: { topic },
        bodySerializer: () => `topic=${topic}`,
        headers: { ...invalidRequest, "Content-Type": "text/plain" },
      }),
      415,
      "urn:kmirror:problem:unsupported-media-type",
    );
    expectProblem(
      "pause, a body over 1 MiB",
      await admin.POST("/v1/mirrors/{mirror}/topics:pause", {
        params: { path: { mirror } },
        body: { topic: "x".repeat(2 << 20) },
        headers: invalidRequest,
      }),
      413,
      "urn:kmirror:problem:body-too-large",
    );
    expectProblem(
      "pause with a wait over 5m",
      await admin.POST("/v1/mirrors/{mirror}/topics:pause", {
        params: { path: { mirror }, query: { wait: "1h" } },
        body: { topic },
      }),
      400,
      "urn:kmirror:problem:validation",
    );
    // ?wait: the call returns once every partition is PAUSED.
    const paused = await admin.POST("/v1/mirrors/{mirror}/topics:pause", {
      params: { path: { mirror }, query: { wait: "60s" } },
      body: { topic },
    });
    const pw = paused.data?.wait?.topics[0];
    check(paused.data?.action === "pause" && paused.data.wait?.completed === true && pw?.target_state === "PAUSED" &&
      pw.ready === pw.total && pw.failed === 0, `pause and wait: ${JSON.stringify(paused.data ?? paused.error)}`);
    const again = expectProblem(
      "pause again",
      await admin.POST("/v1/mirrors/{mirror}/topics:pause", { params: { path: { mirror } }, body: { topic } }),
      409,
      "urn:kmirror:problem:conflict",
    );
    check(again.topics?.[0]?.desired_state === "paused", `pause again: topics ${JSON.stringify(again.topics)}`);
    await waitFor(mirror, topic, "PAUSED");
    const resumed = await admin.POST("/v1/mirrors/{mirror}/topics:resume", {
      params: { path: { mirror }, query: { wait: "60s" } },
      body: { topic },
    });
    check(resumed.data?.action === "resume" && resumed.data.wait?.completed === true &&
      resumed.data.wait.topics[0]?.ready === 3, `resume and wait: ${JSON.stringify(resumed.data ?? resumed.error)}`);
    await waitFor(mirror, topic, "MIRRORING");
  }

  // Partitions: offset translation once records are mirrored.
  {
    const deadline = Date.now() + 60_000;
    let translated: Schemas["Translation"] | undefined;
    while (Date.now() < deadline && translated === undefined) {
      const res = await admin.GET("/v1/mirrors/{mirror}/topics/{topic}/partitions/{partition}/translate", {
        params: { path: { mirror, topic, partition: 0 }, query: { source_offset: 1 } },
      });
      if (res.data) translated = res.data;
      else {
        check(res.response.status === 404, `translate: ${res.response.status} ${JSON.stringify(res.error)}`);
        await sleep(200);
      }
    }
    check(translated?.source_offset === 1 && translated.exact, `translate: ${JSON.stringify(translated)}`);
    expectProblem(
      "translate a bad partition",
      await admin.GET("/v1/mirrors/{mirror}/topics/{topic}/partitions/{partition}/translate", {
        params: { path: { mirror, topic, partition: 99 }, query: { source_offset: 0 } },
      }),
      404,
      "urn:kmirror:problem:not-found",
    );
  }

  // History, a sync pass, the event stream.
  {
    const h = await admin.GET("/v1/history", { params: { query: { mirror } } });
    check(h.data !== undefined && h.data.interval_seconds > 0 && h.data.series[0]?.mirror === mirror, "history");
    expectProblem(
      "history of an unknown mirror",
      await admin.GET("/v1/history", { params: { query: { mirror: "nope" } } }),
      404,
      "urn:kmirror:problem:not-found",
    );

    // The preflight: a row per check, typed by cluster and status.
    const pre = await admin.POST("/v1/mirrors/{mirror}:check", { params: { path: { mirror } }, body: {} });
    check(pre.data !== undefined && pre.data.mirror === mirror && pre.data.checks.length > 0, `check: ${JSON.stringify(pre.error)}`);
    const row: Schemas["MirrorCheck"] | undefined = pre.data.checks.find((c) => c.cluster === "source" && c.check === "connect");
    check(row?.status === "pass", `check: source connect ${JSON.stringify(row)}`);
    expectProblem(
      "check of topics that match nothing",
      await admin.POST("/v1/mirrors/{mirror}:check", { params: { path: { mirror } }, body: { topic: "nothing-matches-this" } }),
      404,
      "urn:kmirror:problem:no-match",
    );

    const sync = await admin.POST("/v1/mirrors/{mirror}:sync", { params: { path: { mirror } } });
    check(sync.data?.trigger === "request" && typeof sync.data.ok === "boolean", `sync: ${JSON.stringify(sync.error)}`);
    check(!Number.isNaN(new Date(sync.data.finished_at).getTime()), "sync: finished_at");

    // The stream never ends: read it as a stream, from the start, until a
    // partition state change has passed.
    const msgs = await readEvents({ query: { mirror, since: 0 } }, (got) =>
      got.length >= 4 && got.some((m) => m.data.kind === "partition.state"));
    const first = msgs[0];
    check(first?.data.kind === "mirror.created" && first.data.mirror === mirror, `events: first ${JSON.stringify(first)}`);
    let prev = 0;
    for (const m of msgs) {
      check(m.event === m.data.kind && m.id === String(m.data.id) && m.data.id > prev, `events: ${JSON.stringify(m)}`);
      prev = m.data.id;
    }
    // The kind narrows the event: a state change's fields are typed and
    // required, with null where a value is absent.
    const change = msgs.map((m) => m.data).find((e) => e.kind === "partition.state");
    check(change !== undefined && change.kind === "partition.state", "events: no partition.state");
    const d: Schemas["PartitionStateData"] = change.data;
    const from: PartitionState = d.from;
    const to: PartitionState = d.to;
    const owner: string | null = d.owner;
    check(d.mirror === mirror && d.topic === topic && change.partition === d.partition && d.epoch > 0,
      `partition.state: ${JSON.stringify(change)}`);
    check(from !== to && typeof owner === "string" && owner !== "" && (to === "FAILED") === (d.error !== null),
      `partition.state: ${JSON.stringify(change)}`);
    check(change.message.includes(`${from} → ${to}`), `partition.state message: ${change.message}`);

    // Resuming with Last-Event-ID gives exactly the events after that id.
    const after = msgs[1];
    check(after !== undefined, "events: a second message");
    const resumed = await readEvents(
      { query: { mirror }, header: { "Last-Event-ID": after.id } },
      (got) => got.length >= 2,
    );
    const ids = (list: StreamMessage[]) => list.map((m) => m.id).join();
    const n = Math.min(resumed.length, msgs.length - 2);
    check(n >= 2 && ids(resumed.slice(0, n)) === ids(msgs.slice(2, 2 + n)),
      `resume after ${after.id}: ${ids(resumed)}, want the ids after it, ${ids(msgs.slice(2))}`);
    expectProblem(
      "events after a bad id",
      await admin.GET("/v1/events", { params: { header: { "Last-Event-ID": "x" } } }),
      400,
      "urn:kmirror:problem:validation",
    );
  }

  // Failover and delete: not while a topic mirrors; after remove, yes.
  {
    expectProblem(
      "delete a mirroring mirror",
      await admin.DELETE("/v1/mirrors/{mirror}", { params: { path: { mirror } } }),
      409,
      "urn:kmirror:problem:conflict",
    );
    // A failover preview: per partition, what a remove now would leave
    // behind; nothing changes.
    const preview = await admin.POST("/v1/mirrors/{mirror}/topics:remove", {
      params: { path: { mirror }, query: { dry_run: true } },
      body: { topic },
    });
    const fp = preview.data?.failover?.[0];
    check(preview.data?.action === "remove" && fp?.topic === topic && fp.partitions.length === 3 &&
      fp.partitions.every((p) => typeof p.lag === "number" && p.source_end_offset !== null &&
        (p.lag === 0) === (p.newest_not_copied === null)),
      `remove: preview ${JSON.stringify(preview.data ?? preview.error)}`);
    const removed = await admin.POST("/v1/mirrors/{mirror}/topics:remove", { params: { path: { mirror } }, body: { topic } });
    check(removed.data?.action === "remove", "remove");
    expectProblem(
      "delete with a bad wait",
      // Outside the spec's pattern for a Go duration: the server refuses it too.
      await admin.DELETE("/v1/mirrors/{mirror}", { params: { path: { mirror }, query: { wait: "soon" } }, headers: invalidRequest }),
      400,
      "urn:kmirror:problem:validation",
    );
    const deleted = await admin.DELETE("/v1/mirrors/{mirror}", { params: { path: { mirror }, query: { wait: "30s" } } });
    check(deleted.response.status === 204, `delete: ${deleted.response.status} ${JSON.stringify(deleted.error)}`);
  }
  console.log("every operation answered as the spec says");
}

type StreamMessage = Schemas["EventStreamMessage"];

// readEvents opens the event stream and reads server-sent events, skipping
// keep-alive comments, until enough(messages) says so (at most 30s), then
// closes it. Each message is typed by the spec.
async function readEvents(
  params: { query: { mirror: string; since?: number }; header?: { "Last-Event-ID": string } },
  enough: (got: StreamMessage[]) => boolean,
): Promise<StreamMessage[]> {
  const abort = new AbortController();
  const timer = setTimeout(() => abort.abort(), 30_000);
  const stream = await admin.GET("/v1/events", { params, parseAs: "stream", signal: abort.signal });
  check(stream.response.headers.get("Content-Type") === "text/event-stream", "events: content type");
  const body = stream.data;
  check(body !== undefined && body !== null, "events: no body");
  const reader = body.getReader();
  const decoder = new TextDecoder();
  const got: StreamMessage[] = [];
  let buf = "";
  try {
    while (!enough(got)) {
      const { value, done } = await reader.read();
      if (done) throw new Error(`events: the stream ended after ${got.length} message(s)`);
      buf += decoder.decode(value, { stream: true });
      let end: number;
      while ((end = buf.indexOf("\n\n")) >= 0) {
        const block = buf.slice(0, end);
        buf = buf.slice(end + 2);
        const fields = new Map<string, string>();
        for (const line of block.split("\n")) {
          if (line.startsWith(":")) continue;
          const i = line.indexOf(": ");
          if (i > 0) fields.set(line.slice(0, i), line.slice(i + 2));
        }
        const data = fields.get("data");
        if (data === undefined) continue;
        const event: Schemas["Event"] = JSON.parse(data);
        got.push({ id: fields.get("id") ?? "", event: fields.get("event") as Schemas["EventKind"], data: event });
      }
    }
  } finally {
    clearTimeout(timer);
    await reader.cancel().catch(() => {});
    abort.abort();
  }
  return got;
}

main().catch((err: unknown) => {
  console.error(err);
  process.exit(1);
});
