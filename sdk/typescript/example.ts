// How @kmirror/client reads: typed calls, and the event stream as typed
// events, narrowed by kind without a cast. TestTypeScriptClient
// (cmd/kmirror) type-checks it with tsc --strict (npm run check-example);
// each @ts-expect-error below is a mistake the types must refuse.
import {
  createKmirrorClient,
  events,
  KmirrorEventStreamError,
  type Event,
  type PartitionState,
  type PartitionStateEvent,
  type PlainEvent,
} from "@kmirror/client";

const client = createKmirrorClient({ baseUrl: "http://127.0.0.1:8080", token: "kmt_..." });

// A call: data is the 200's schema, error the Problem.
const paused = await client.POST("/v1/mirrors/{mirror}/topics:pause", {
  params: { path: { mirror: "demo" }, query: { wait: "30s" } },
  body: { topic: "orders" },
});
if (paused.error) console.error(paused.error.type, paused.error.detail);
else console.log(paused.data.topics, paused.data.wait?.completed);

// Every change of one mirror, until aborted (here after a minute).
const abort = new AbortController();
const timer = setTimeout(() => abort.abort(), 60_000);
try {
  for await (const e of events(client, { mirror: "demo", signal: abort.signal })) {
    console.log(`#${e.id} ${describe(e)}`);
  }
} catch (err) {
  // Thrown only when reconnecting would not help: a bad token, a bad
  // parameter.
  if (err instanceof KmirrorEventStreamError) console.error(err.status, err.problem?.type, err.message);
  else throw err;
} finally {
  clearTimeout(timer);
}

// The kind narrows the event: each branch sees its own data.
function describe(e: Event): string {
  switch (e.kind) {
    case "partition.state": {
      const d = e.data;
      const why = d.error ?? d.reason ?? "";
      return `${d.topic}/${d.partition}: ${d.from} → ${d.to} (epoch ${d.epoch}, ${d.owner ?? "no owner"}) ${why}`;
    }
    case "partition.owner":
      return `${e.data.topic}/${e.data.partition}: taken over by ${e.data.owner ?? "nobody"} from ${e.data.previous_owner ?? "?"}`;
    case "partition.realigned":
      return `${e.data.topic}/${e.data.partition}: realigned in ${e.data.state}: ${e.data.cause}`;
    default: {
      const plain: PlainEvent = e; // every other kind carries only a message
      // @ts-expect-error a plain event has no data
      void plain.data;
      return `${plain.kind} ${plain.actor ?? ""}: ${plain.message}`;
    }
  }
}

// kinds: only state changes, typed as such: no narrowing needed.
const failed: PartitionStateEvent[] = [];
for await (const s of events(client, { kinds: ["partition.state"], lastEventId: 0, signal: AbortSignal.timeout(10_000) })) {
  const to: PartitionState = s.data.to;
  if (to === "FAILED") failed.push(s);
}
console.log(`${failed.length} partition(s) failed in the last events`);

// Two kinds: a union of the two.
for await (const t of events(client, { kinds: ["topics.paused", "partition.owner"], signal: AbortSignal.timeout(1_000) })) {
  if (t.kind === "partition.owner") console.log(t.data.previous_owner);
  else console.log(t.kind satisfies "topics.paused", t.message);
  // @ts-expect-error not a kind asked for
  if (t.kind === "partition.state") break;
}

// @ts-expect-error not an event kind
events(client, { kinds: ["partition.moved"] });
