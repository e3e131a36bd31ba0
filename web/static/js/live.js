// Live updates from /v1/events (server-sent events). EventSource cannot
// send a bearer token, so the stream is read with fetch. After a drop it
// reconnects with Last-Event-ID and a growing pause; while it is down the
// page polls instead. Either way, callers are told "something changed".

import { headers } from './api.js';

const POLL_LIVE_MS = 5000; // lag and rates move without events
const POLL_DOWN_MS = 2000;

export class Live {
  /** onChange(event|null) is called on each event and on each poll tick. */
  constructor(onChange, onStatus) {
    this.onChange = onChange;
    this.onStatus = onStatus;
    this.lastId = null;
    this.connected = false;
    this.stopped = false;
    this.backoff = 500;
  }

  start() {
    this.stopped = false;
    this.loop();
    this.schedulePoll();
  }

  stop() {
    this.stopped = true;
    this.abort?.abort();
    clearTimeout(this.pollTimer);
  }

  schedulePoll() {
    clearTimeout(this.pollTimer);
    if (this.stopped) return;
    this.pollTimer = setTimeout(() => {
      this.onChange(null);
      this.schedulePoll();
    }, this.connected ? POLL_LIVE_MS : POLL_DOWN_MS);
  }

  setConnected(ok, why) {
    if (this.connected !== ok) {
      this.connected = ok;
      this.schedulePoll();
    }
    this.onStatus(ok, why);
  }

  async loop() {
    while (!this.stopped) {
      this.abort = new AbortController();
      try {
        const h = headers({ Accept: 'text/event-stream' });
        if (this.lastId !== null) h['Last-Event-ID'] = this.lastId;
        const res = await fetch('/v1/events', { headers: h, signal: this.abort.signal, cache: 'no-store' });
        if (res.status === 401) {
          window.dispatchEvent(new CustomEvent('kmirror:unauthorized'));
          return;
        }
        if (!res.ok || !res.body) throw new Error(`events answered ${res.status}`);
        this.backoff = 500;
        this.setConnected(true);
        await this.read(res.body);
        throw new Error('the event stream ended');
      } catch (err) {
        if (this.stopped) return;
        this.setConnected(false, err.message);
        await new Promise((r) => setTimeout(r, this.backoff));
        this.backoff = Math.min(this.backoff * 2, 15000);
      }
    }
  }

  async read(body) {
    const reader = body.pipeThrough(new TextDecoderStream()).getReader();
    let buf = '';
    for (;;) {
      const { value, done } = await reader.read();
      if (done) return;
      buf += value;
      let cut;
      while ((cut = buf.indexOf('\n\n')) >= 0) {
        this.dispatch(buf.slice(0, cut));
        buf = buf.slice(cut + 2);
      }
    }
  }

  dispatch(block) {
    let id = null;
    let kind = 'message';
    const data = [];
    for (const line of block.split('\n')) {
      if (line.startsWith(':')) continue;
      const i = line.indexOf(':');
      const field = i < 0 ? line : line.slice(0, i);
      const val = i < 0 ? '' : line.slice(i + 1).replace(/^ /, '');
      if (field === 'id') id = val;
      else if (field === 'event') kind = val;
      else if (field === 'data') data.push(val);
    }
    if (id !== null) this.lastId = id;
    if (!data.length) return;
    let ev = null;
    try {
      ev = JSON.parse(data.join('\n'));
    } catch {
      return;
    }
    this.onChange({ kind, ...ev });
  }
}
