// A parser of text/event-stream, as the HTML standard's "event stream
// interpretation" reads one (what a browser's EventSource does), for
// runtimes and callers that cannot use EventSource: it cannot send a bearer
// token, and Node has none.

/** One message of an event stream, dispatched by a blank line. */
export interface ServerSentEvent {
  /**
   * The stream's last event id when the message was dispatched: its own
   * `id:` field, or the one before it (an id is kept until another comes).
   */
  id: string;
  /** The `event:` field; "message" when the message has none. */
  event: string;
  /** The `data:` lines, joined with "\n". */
  data: string;
}

/**
 * SseParser reads an event stream from decoded text, in chunks cut
 * anywhere (a chunk may end mid-line, or between the CR and LF of a line
 * ending). Lines end with LF, CR or CRLF; a line that starts with ":" is a
 * comment (kmirror's keep-alives); a field without a colon has an empty
 * value, and one space after the colon is dropped; `data:` lines add up,
 * `retry:` with digits only sets {@link retry}, an `id:` with a NUL is
 * ignored, other fields are ignored. A message with no data dispatches
 * nothing, but its id still counts (see {@link lastEventId}). A message not
 * ended by a blank line when the stream ends is never dispatched: drop the
 * parser with the connection.
 */
export class SseParser {
  #buf = "";
  #started = false;
  #skipLF = false; // the last chunk ended with CR: a LF first in the next one ends no line
  #data: string[] = [];
  #event = "";
  #idBuffer: string;
  #lastEventId: string;
  #retry: number | undefined;

  /** lastEventId is the id a stream resumed after starts with (the one sent as Last-Event-ID). */
  constructor(lastEventId = "") {
    this.#idBuffer = lastEventId;
    this.#lastEventId = lastEventId;
  }

  /** The id of the last message ended by a blank line, with data or not. */
  get lastEventId(): string {
    return this.#lastEventId;
  }

  /** The last `retry:` value, in milliseconds; undefined until one came. */
  get retry(): number | undefined {
    return this.#retry;
  }

  /** push reads the next chunk of text and returns the messages it ended. */
  push(chunk: string): ServerSentEvent[] {
    const out: ServerSentEvent[] = [];
    let text = chunk;
    if (text.length === 0) return out;
    if (this.#skipLF) {
      this.#skipLF = false;
      if (text.charCodeAt(0) === 0x0a) text = text.slice(1);
    }
    if (!this.#started && text.length > 0) {
      this.#started = true;
      if (text.charCodeAt(0) === 0xfeff) text = text.slice(1); // a byte order mark, when the decoder kept it
    }
    // What is buffered holds no line ending: scan only the new text.
    let start = 0;
    let i = this.#buf.length;
    const buf = this.#buf + text;
    for (; i < buf.length; i++) {
      const c = buf.charCodeAt(i);
      if (c !== 0x0a && c !== 0x0d) continue;
      this.#line(buf.slice(start, i), out);
      if (c === 0x0d) {
        if (i + 1 === buf.length) this.#skipLF = true;
        else if (buf.charCodeAt(i + 1) === 0x0a) i++;
      }
      start = i + 1;
    }
    this.#buf = buf.slice(start);
    return out;
  }

  #line(line: string, out: ServerSentEvent[]): void {
    if (line === "") {
      this.#dispatch(out);
      return;
    }
    if (line.charCodeAt(0) === 0x3a) return; // ":": a comment
    const colon = line.indexOf(":");
    const field = colon < 0 ? line : line.slice(0, colon);
    let value = colon < 0 ? "" : line.slice(colon + 1);
    if (value.charCodeAt(0) === 0x20) value = value.slice(1);
    switch (field) {
      case "event":
        this.#event = value;
        break;
      case "data":
        this.#data.push(value);
        break;
      case "id":
        if (!value.includes("\0")) this.#idBuffer = value;
        break;
      case "retry":
        if (/^[0-9]+$/.test(value)) this.#retry = Number(value);
        break;
    }
  }

  #dispatch(out: ServerSentEvent[]): void {
    this.#lastEventId = this.#idBuffer;
    const data = this.#data;
    const event = this.#event;
    this.#data = [];
    this.#event = "";
    if (data.length === 0) return;
    out.push({ id: this.#lastEventId, event: event || "message", data: data.join("\n") });
  }
}
