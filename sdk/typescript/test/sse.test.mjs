// The event stream parser, against the HTML standard's rules: no server
// needed. Run with npm test after npm run build.
import assert from "node:assert/strict";
import { test } from "node:test";

import { SseParser } from "../dist/index.js";

// parse feeds the chunks to a new parser and returns what it dispatched,
// with its last event id and retry.
function parse(chunks, lastEventId) {
  const p = new SseParser(lastEventId);
  const events = chunks.flatMap((c) => p.push(c));
  return { events, lastEventId: p.lastEventId, retry: p.retry };
}

// kmirror's own stream: messages with id, event and one data line, and
// keep-alive comments.
const kmirrorStream =
  ": keep-alive\n\n" +
  'id: 41\nevent: topics.paused\ndata: {"id":41,"kind":"topics.paused","message":"paused bench"}\n\n' +
  ": keep-alive\n\n" +
  'id: 42\nevent: partition.state\ndata: {"id":42,"kind":"partition.state","message":"bench/0: MIRRORING → PAUSED"}\n\n';

test("kmirror's messages, keep-alives skipped", () => {
  const { events, lastEventId } = parse([kmirrorStream]);
  assert.deepEqual(
    events.map((e) => [e.id, e.event, JSON.parse(e.data).kind]),
    [
      ["41", "topics.paused", "topics.paused"],
      ["42", "partition.state", "partition.state"],
    ],
  );
  assert.equal(lastEventId, "42");
});

test("the same messages however the text is cut", () => {
  const want = parse([kmirrorStream]).events;
  for (let i = 0; i <= kmirrorStream.length; i++) {
    assert.deepEqual(parse([kmirrorStream.slice(0, i), kmirrorStream.slice(i)]).events, want, `cut at ${i}`);
  }
  assert.deepEqual(parse([...kmirrorStream]).events, want, "one character at a time");
});

test("multi-line data, and every line ending: LF, CR, CRLF, CRLF cut between CR and LF", () => {
  const want = [{ id: "", event: "message", data: "a\nb\n\nc" }];
  assert.deepEqual(parse(["data: a\ndata: b\ndata\ndata:c\n\n"]).events, want);
  assert.deepEqual(parse(["data: a\rdata: b\rdata\rdata:c\r\r"]).events, want);
  assert.deepEqual(parse(["data: a\r\ndata: b\r\ndata\r\ndata:c\r\n\r\n"]).events, want);
  assert.deepEqual(parse(["data: a\r", "\ndata: b\r", "\ndata\r", "\ndata:c\r", "\n\r", "\n"]).events, want);
  // A CR then a LF in the next chunk is one line ending, not a blank line.
  assert.deepEqual(parse(["data: a\r", "\n", "data: b\n\n"]).events, [{ id: "", event: "message", data: "a\nb" }]);
});

test("one space after the colon is dropped, not two; a field without a colon is empty", () => {
  assert.deepEqual(parse(["data:  x \nevent\n\n"]).events, [{ id: "", event: "message", data: " x " }]);
});

test("comments, unknown fields and a blank line with nothing before it dispatch nothing", () => {
  const { events } = parse([":x\n\n\nfoo: bar\n\n: data: no\n\n"]);
  assert.deepEqual(events, []);
});

test("an id is kept until another comes; an id-only message counts; an id with NUL is ignored", () => {
  const { events, lastEventId } = parse(["id: 7\ndata: a\n\ndata: b\n\nid: 9\n\nid: 1\0\ndata: c\n\n"]);
  assert.deepEqual(
    events.map((e) => [e.id, e.data]),
    [
      ["7", "a"],
      ["7", "b"],
      ["9", "c"],
    ],
  );
  assert.equal(lastEventId, "9");
  assert.equal(parse(["data: d\n\n"], "12").events[0]?.id, "12", "a resumed stream starts with its Last-Event-ID");
});

test("retry: digits only", () => {
  assert.equal(parse(["retry: 2500\n\n"]).retry, 2500);
  assert.equal(parse(["retry: 2500\nretry: 1e3\nretry: -1\nretry:\n\n"]).retry, 2500);
  assert.equal(parse([": nothing\n\n"]).retry, undefined);
});

test("a message the stream ended in the middle of is not dispatched", () => {
  const { events, lastEventId } = parse(['id: 5\nevent: topics.added\ndata: {"id":5,"ki']);
  assert.deepEqual(events, []);
  assert.equal(lastEventId, "", "its id does not count either");
});

test("a byte order mark first is dropped", () => {
  assert.deepEqual(parse(["\uFEFFdata: x\n\n"]).events, [{ id: "", event: "message", data: "x" }]);
});
