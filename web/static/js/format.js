// Formatting for people: counts with separators, rates, times in the
// browser's zone with the ISO time on hover.

const int = new Intl.NumberFormat(undefined, { maximumFractionDigits: 0 });
const dec = new Intl.NumberFormat(undefined, { maximumFractionDigits: 1 });

/** count formats an integer; null and undefined are shown as an em dash. */
export function count(n) {
  return n === null || n === undefined ? '—' : int.format(n);
}

/** rate formats records per second. */
export function rate(r) {
  if (r === null || r === undefined) return '—';
  return `${r >= 100 ? int.format(r) : dec.format(r)}/s`;
}

/** seconds formats a length of time given in seconds: "12.5 s", "4 min", "3.2 h". */
export function seconds(s) {
  if (s === null || s === undefined) return '—';
  // The bounds are where one decimal would round up to "60".
  if (s < 59.95) return `${dec.format(s)} s`;
  if (s < 3597) return `${dec.format(s / 60)} min`;
  return `${dec.format(s / 3600)} h`;
}

const timeFmt = new Intl.DateTimeFormat(undefined, {
  year: 'numeric', month: 'short', day: 'numeric', hour: '2-digit', minute: '2-digit', second: '2-digit',
});

/** time returns a <time> element: local time shown, ISO on hover. */
export function time(iso) {
  const el = document.createElement('time');
  if (!iso) {
    el.textContent = '—';
    return el;
  }
  const d = new Date(iso);
  el.dateTime = d.toISOString();
  el.title = d.toISOString();
  el.textContent = timeFmt.format(d);
  return el;
}

/** ago describes how long ago iso was, for "updated 5 s ago" texts. */
export function ago(iso, now = Date.now()) {
  if (!iso) return 'never';
  const s = Math.max(0, Math.round((now - new Date(iso).getTime()) / 1000));
  if (s < 60) return `${s} s ago`;
  if (s < 3600) return `${Math.round(s / 60)} min ago`;
  if (s < 86400) return `${Math.round(s / 3600)} h ago`;
  return `${Math.round(s / 86400)} d ago`;
}

/** regexQuote escapes a topic name for the API's whole-name RE2 patterns. */
export function regexQuote(s) {
  return s.replace(/[\\^$.*+?()[\]{}|]/g, '\\$&');
}
