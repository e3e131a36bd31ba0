// @kmirror/client: kmirror's REST API from TypeScript. The calls are
// openapi-fetch's, typed by src/schema.d.ts (openapi-typescript, from
// openapi/openapi.json); events() reads the event stream, which a generated
// client can only hand over as bytes.
import createClient, { type Client } from "openapi-fetch";

import type { components, paths } from "./schema.js";
import { SseParser } from "./sse.js";

export type { components, operations, paths } from "./schema.js";
export { SseParser, type ServerSentEvent } from "./sse.js";

/** Every schema of the spec, by name: `Schemas["MirrorStatus"]`. */
export type Schemas = components["schemas"];
export type Problem = Schemas["Problem"];
export type PartitionState = Schemas["PartitionState"];
export type DesiredState = Schemas["DesiredState"];

/**
 * An event of GET /v1/events: a union told apart by `kind`, so that
 * `if (e.kind === "partition.state")` narrows it to a
 * {@link PartitionStateEvent}, whose `data` has from, to, epoch, owner...
 */
export type Event = Schemas["Event"];
/** Every event kind. */
export type EventKind = Schemas["EventKind"];
export type PartitionStateEvent = Schemas["PartitionStateEvent"];
export type PartitionOwnerEvent = Schemas["PartitionOwnerEvent"];
export type PartitionRealignedEvent = Schemas["PartitionRealignedEvent"];
/** An event of the kinds that carry only a message (operator actions, sync changes, a restore). */
export type PlainEvent = Schemas["PlainEvent"];

/**
 * EventOf<K> is the event of the kinds K: `EventOf<"partition.state">` is
 * a PartitionStateEvent, `EventOf<"topics.paused">` a PlainEvent whose kind
 * is "topics.paused". EventOf<EventKind> is Event.
 */
export type EventOf<K extends EventKind> = [EventKind] extends [K]
  ? Event
  : Event extends infer E
    ? E extends { kind: infer EK }
      ? [Extract<EK, K>] extends [never]
        ? never
        : E & { kind: Extract<EK, K> }
      : never
    : never;

// The kinds this package knows, checked against the generated EventKind
// both ways: a kind added to the spec fails the build until it is here.
const knownKinds = {
  "mirror.created": true,
  "mirror.updated": true,
  "mirror.deleted": true,
  "mirror.sync_requested": true,
  "topics.added": true,
  "topics.paused": true,
  "topics.resumed": true,
  "topics.removed": true,
  "topics.auto_added": true,
  "topics.source_deleted": true,
  "topic.partitions_added": true,
  "partition.state": true,
  "partition.owner": true,
  "partition.realigned": true,
  "state.restored": true,
  "schemas.copied": true,
  "schemas.sync_failed": true,
  "schemas.sync_recovered": true,
  "schemas.writable": true,
} as const satisfies Record<EventKind, true>;

/** Every event kind, at run time. */
export const eventKinds: readonly EventKind[] = Object.keys(knownKinds) as EventKind[];

/** isEventKind says whether s is a kind this package knows. */
export function isEventKind(s: string): s is EventKind {
  return Object.hasOwn(knownKinds, s);
}

/** The client: openapi-fetch's, typed with the spec's paths. */
export type KmirrorClient = Client<paths>;

export interface KmirrorClientOptions {
  /** The server's address, such as "http://127.0.0.1:8080". */
  baseUrl: string;
  /** An API token, sent as `Authorization: Bearer <token>` (none when undefined or ""). */
  token?: string | undefined;
  /** The fetch to call (globalThis.fetch when undefined): to add a proxy, retries, logging, a test double. */
  fetch?: ((input: Request) => Promise<Response>) | undefined;
}

/**
 * createKmirrorClient returns an openapi-fetch client of kmirror's API:
 * `client.GET("/v1/partitions", { params: { query: { mirror: "demo" } } })`
 * answers `{ data }` typed as the spec's 200, or `{ error }`, a Problem.
 */
export function createKmirrorClient(options: KmirrorClientOptions): KmirrorClient {
  const { baseUrl, token, fetch } = options;
  return createClient<paths>({
    baseUrl,
    ...(token ? { headers: { Authorization: `Bearer ${token}` } } : {}),
    ...(fetch ? { fetch } : {}),
  });
}

export interface EventsOptions<K extends EventKind = EventKind> {
  /** Only this mirror's events (of its current incarnation unless `incarnation` says otherwise). */
  mirror?: string | undefined;
  /** Only the changes this API token (by name) made. */
  actor?: string | undefined;
  /** With mirror: the events of this incarnation of it, or of every mirror of that name ("all"). */
  incarnation?: number | "all" | undefined;
  /**
   * Only events of these kinds; the events yielded are typed accordingly
   * (`kinds: ["partition.state"]` yields PartitionStateEvent). The server
   * has no such filter: the others are read and skipped, their ids still
   * count for resuming.
   */
  kinds?: readonly K[] | undefined;
  /**
   * Start after this event id, as a reconnect would ("0": from the first
   * event). Without it the server starts with its last 50 events.
   */
  lastEventId?: string | number | undefined;
  /** Aborting it ends the iteration within moments, without an error. */
  signal?: AbortSignal | undefined;
  /**
   * How long to wait before reconnecting after a dropped connection, in
   * milliseconds (default 1000; a `retry:` field of the stream replaces
   * it). It doubles with each failed attempt in a row, up to 30 s, and a
   * 429 or 503's Retry-After makes it longer.
   */
  reconnectDelayMs?: number | undefined;
  /**
   * A connection that brings nothing, not even a keep-alive, for this long
   * is taken as dropped and made again (default 45000: the server sends a
   * keep-alive every 15 s; 0 never).
   */
  idleTimeoutMs?: number | undefined;
  /** Called before each wait to reconnect: why, which attempt in a row, how long the wait. */
  onReconnect?: ((info: ReconnectInfo) => void) | undefined;
}

export interface ReconnectInfo {
  /** What ended the connection, or why it could not be made. */
  error: unknown;
  /** 1 for the first attempt after a connection that was open; more when attempts failed. */
  attempt: number;
  /** The wait before the attempt, in milliseconds. */
  delayMs: number;
  /** The Last-Event-ID it resumes after: the last event read (undefined when none was and none was given). */
  lastEventId: string | undefined;
}

/**
 * KmirrorEventStreamError ends an iteration of {@link events} that should
 * not be retried: the server refused the request (a 4xx other than 429: a
 * bad token, a bad id or parameter; `status` and `problem` say which), or
 * answered something that is not the event stream, or sent an event whose
 * data is not an event. Reconnects that are worth trying (the network, a
 * 429, a 5xx) are made instead of throwing.
 */
export class KmirrorEventStreamError extends Error {
  override name = "KmirrorEventStreamError";
  /** The HTTP status, when the server answered with an error. */
  readonly status: number | undefined;
  /** The server's problem+json, when it sent one. */
  readonly problem: Problem | undefined;

  constructor(message: string, opts: { status?: number | undefined; problem?: Problem | undefined; cause?: unknown } = {}) {
    super(message, opts.cause === undefined ? undefined : { cause: opts.cause });
    this.status = opts.status;
    this.problem = opts.problem;
  }
}

const defaultReconnectDelayMs = 1000;
const maxReconnectDelayMs = 30_000;
const defaultIdleTimeoutMs = 45_000;

/**
 * events reads GET /v1/events and yields each event, typed by its kind:
 *
 * ```ts
 * for await (const e of events(client, { mirror: "demo", signal })) {
 *   if (e.kind === "partition.state") console.log(e.data.from, "→", e.data.to);
 * }
 * ```
 *
 * It remembers the last event's id, and when the connection drops (or
 * stays silent past `idleTimeoutMs`, or a new one is refused with a 429 or
 * 5xx, or fails in the network) it waits `reconnectDelayMs` and asks again
 * with that id as Last-Event-ID: the server then sends exactly the events
 * after it, none missed, none repeated.
 *
 * It ends without an error when `signal` aborts: the pending read is
 * cancelled at once, not when the next keep-alive arrives. Leaving the
 * loop (break, return, throw) cancels the stream too. (A return() called
 * on the generator while a next() is pending waits for that next(), as
 * with any async generator: the signal is what stops a wait.)
 *
 * It throws a {@link KmirrorEventStreamError} when reconnecting would not
 * help. Events of kinds this package does not know (from a newer server)
 * are skipped.
 *
 * `source` is a client from {@link createKmirrorClient}, or the options to
 * make one.
 */
export async function* events<K extends EventKind = EventKind>(
  source: KmirrorClient | KmirrorClientOptions,
  options: EventsOptions<K> = {},
): AsyncGenerator<EventOf<K>, void, undefined> {
  const client = isClient(source) ? source : createKmirrorClient(source);
  const { signal } = options;
  const wanted = options.kinds === undefined ? undefined : new Set<string>(options.kinds);
  const idleTimeoutMs = options.idleTimeoutMs ?? defaultIdleTimeoutMs;
  let baseDelayMs = options.reconnectDelayMs ?? defaultReconnectDelayMs;
  let lastEventId = options.lastEventId === undefined ? undefined : String(options.lastEventId);
  const query: EventsQuery = {};
  if (options.mirror !== undefined) query.mirror = options.mirror;
  if (options.actor !== undefined) query.actor = options.actor;
  if (options.incarnation !== undefined) query.incarnation = String(options.incarnation);

  // Every wait races stop, which settles with `stopped` when signal
  // aborts: an abort ends the generator even where a runtime would not
  // unblock the wait (a fetch whose abort leaves a read pending).
  const stop = stopSignal(signal);
  let failures = 0; // attempts in a row that did not open the stream
  try {
    while (!stop.aborted()) {
      const conn = new AbortController(); // this connection's fetch
      const onStop = () => conn.abort(signal?.reason);
      stop.onAbort(onStop);
      let reader: ReadableStreamDefaultReader<Uint8Array> | undefined;
      let dropped: unknown; // why the connection ended, to retry
      let retryAfterMs = 0;
      try {
        const answer = await stop.race(
          client.GET("/v1/events", {
            params: { query, ...(lastEventId === undefined ? {} : { header: { "Last-Event-ID": lastEventId } }) },
            parseAs: "stream",
            signal: conn.signal,
          }),
        ).catch((err: unknown) => ({ failed: err }));
        if (answer === stopped) return;
        if ("failed" in answer) {
          if (stop.aborted()) return;
          dropped = answer.failed; // the network
        } else if (answer.response.ok) {
          const type = answer.response.headers.get("Content-Type") ?? "";
          if (!type.startsWith("text/event-stream")) {
            await answer.response.body?.cancel().catch(() => {});
            throw new KmirrorEventStreamError(`GET /v1/events answered ${type || "no content type"}, not text/event-stream`, {
              status: answer.response.status,
            });
          }
          if (!answer.data) {
            dropped = new Error("GET /v1/events answered without a body");
          } else {
            reader = answer.data.getReader();
          }
        } else {
          const { status } = answer.response;
          const problem = isProblem(answer.error) ? answer.error : undefined;
          const err = new KmirrorEventStreamError(
            `GET /v1/events: ${status}${problem ? ` ${problem.type}: ${problem.detail}` : ""}`,
            { status, problem },
          );
          if (status !== 429 && status < 500) throw err;
          dropped = err;
          retryAfterMs = retryAfter(answer.response.headers.get("Retry-After"));
        }

        if (reader) {
          failures = 0;
          const r = reader;
          const cancel = () => void r.cancel().catch(() => {});
          stop.onAbort(cancel);
          const parser = new SseParser(lastEventId ?? "");
          const decoder = new TextDecoder();
          // Only a read counts: the time the caller takes with an event
          // does not.
          const idle = idleTimer(idleTimeoutMs, cancel);
          try {
            for (;;) {
              idle.reset();
              const next = await stop.race(r.read()).catch((err: unknown) => ({ failed: err }));
              idle.clear();
              if (next === stopped) return;
              if ("failed" in next) {
                dropped = next.failed;
                break;
              }
              if (next.done) {
                dropped = idle.fired()
                  ? new Error(`the event stream sent nothing for ${idleTimeoutMs} ms`)
                  : new Error("the event stream ended");
                break;
              }
              for (const m of parser.push(decoder.decode(next.value, { stream: true }))) {
                if (stop.aborted()) return; // aborted while the caller had the previous event
                if (m.id !== "") lastEventId = m.id;
                const e = toEvent(m.id, m.data);
                if (e !== undefined && (wanted === undefined || wanted.has(e.kind))) {
                  yield e as EventOf<K>;
                }
              }
              lastEventId = parser.lastEventId === "" ? lastEventId : parser.lastEventId;
              if (parser.retry !== undefined) baseDelayMs = parser.retry;
            }
          } finally {
            idle.clear();
            stop.offAbort(cancel);
          }
        }
      } finally {
        stop.offAbort(onStop);
        // Also when the caller left the loop while an event was yielded:
        // the connection must not stay open behind it.
        void reader?.cancel().catch(() => {});
        conn.abort();
      }

      if (stop.aborted()) return;
      failures++;
      const delayMs = Math.max(Math.min(baseDelayMs * 2 ** (failures - 1), maxReconnectDelayMs), retryAfterMs);
      options.onReconnect?.({ error: dropped, attempt: failures, delayMs, lastEventId });
      if ((await stop.race(sleep(delayMs, stop))) === stopped) return;
    }
  } finally {
    stop.dispose();
  }
}

type EventsQuery = NonNullable<paths["/v1/events"]["get"]["parameters"]["query"]>;

function isClient(source: KmirrorClient | KmirrorClientOptions): source is KmirrorClient {
  return typeof (source as Partial<KmirrorClient>).GET === "function";
}

function isProblem(v: unknown): v is Problem {
  return typeof v === "object" && v !== null && typeof (v as { type?: unknown }).type === "string";
}

// toEvent checks a message's data: a JSON object with a numeric id and a
// kind, and, for the partition kinds, their data. It returns undefined for
// a kind this package does not know.
function toEvent(id: string, data: string): Event | undefined {
  let v: unknown;
  try {
    v = JSON.parse(data);
  } catch (err) {
    throw new KmirrorEventStreamError(`event ${id}: the data is not JSON: ${data.slice(0, 200)}`, { cause: err });
  }
  if (typeof v !== "object" || v === null || Array.isArray(v)) {
    throw new KmirrorEventStreamError(`event ${id}: the data is not an object: ${data.slice(0, 200)}`);
  }
  const o = v as { id?: unknown; kind?: unknown; message?: unknown; data?: unknown };
  if (typeof o.id !== "number" || typeof o.kind !== "string" || typeof o.message !== "string") {
    throw new KmirrorEventStreamError(`event ${id}: not an event (no numeric id, kind or message): ${data.slice(0, 200)}`);
  }
  if (!isEventKind(o.kind)) return undefined;
  if (o.kind.startsWith("partition.") && (typeof o.data !== "object" || o.data === null)) {
    throw new KmirrorEventStreamError(`event ${id}: a ${o.kind} event without data: ${data.slice(0, 200)}`);
  }
  return v as Event;
}

// retryAfter reads a Retry-After in seconds, in milliseconds (0 if none).
function retryAfter(h: string | null): number {
  const s = h === null ? NaN : Number(h);
  return Number.isFinite(s) && s > 0 ? Math.min(s * 1000, maxReconnectDelayMs) : 0;
}

const stopped: unique symbol = Symbol("stopped");

interface Stop {
  aborted(): boolean;
  /** race settles as p does, or with `stopped` once the signal aborts. */
  race<T>(p: Promise<T>): Promise<T | typeof stopped>;
  onAbort(f: () => void): void;
  offAbort(f: () => void): void;
  dispose(): void;
}

function stopSignal(signal: AbortSignal | undefined): Stop {
  const listeners = new Set<() => void>();
  let resolve = (): void => {};
  const done = new Promise<typeof stopped>((r) => (resolve = () => r(stopped)));
  const fire = () => {
    resolve();
    for (const f of listeners) f();
    listeners.clear();
  };
  signal?.addEventListener("abort", fire, { once: true });
  return {
    aborted: () => signal?.aborted ?? false,
    race: (p) => Promise.race([p, done]),
    onAbort: (f) => {
      if (signal?.aborted) f();
      else listeners.add(f);
    },
    offAbort: (f) => void listeners.delete(f),
    dispose: () => {
      signal?.removeEventListener("abort", fire);
      listeners.clear();
    },
  };
}

function sleep(ms: number, stop: Stop): Promise<void> {
  return new Promise((resolve) => {
    const t = setTimeout(done, ms);
    function done() {
      clearTimeout(t);
      stop.offAbort(done);
      resolve();
    }
    stop.onAbort(done);
  });
}

function idleTimer(ms: number, onIdle: () => void) {
  let t: ReturnType<typeof setTimeout> | undefined;
  let fired = false;
  return {
    reset() {
      if (ms <= 0) return;
      clearTimeout(t);
      t = setTimeout(() => {
        fired = true;
        onIdle();
      }, ms);
    },
    fired: () => fired,
    clear: () => clearTimeout(t),
  };
}
