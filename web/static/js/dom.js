// Small DOM helpers. Data from the API only ever reaches the page as text
// (textContent, attributes), never as HTML.

/**
 * h builds an element: h('button', {class: 'x', onclick: fn, 'aria-label': 'y'}, 'text', child).
 * Props starting with "on" become listeners; `dataset` is an object; null
 * and false props are skipped; children may be strings, nodes, arrays or null.
 */
export function h(tag, props, ...children) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(props || {})) {
    if (v === null || v === undefined || v === false) continue;
    if (k.startsWith('on') && typeof v === 'function') {
      el.addEventListener(k.slice(2), v);
    } else if (k === 'dataset') {
      Object.assign(el.dataset, v);
    } else if (k === 'class') {
      el.className = v;
    } else if (k in el && typeof v !== 'string') {
      el[k] = v; // value, checked, disabled, hidden...
    } else {
      el.setAttribute(k, v === true ? '' : String(v));
    }
  }
  append(el, children);
  return el;
}

function append(el, children) {
  for (const c of children) {
    if (c === null || c === undefined || c === false) continue;
    if (Array.isArray(c)) append(el, c);
    else el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
}

/** svg builds an SVG element in the SVG namespace. */
export function svg(tag, attrs, ...children) {
  const el = document.createElementNS('http://www.w3.org/2000/svg', tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v !== null && v !== undefined) el.setAttribute(k, String(v));
  }
  for (const c of children.flat()) {
    if (c === null || c === undefined) continue;
    el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return el;
}

/** replace swaps the children of el for the given ones. */
export function replace(el, ...children) {
  el.replaceChildren();
  append(el, children);
}

let idSeq = 0;
/** uid returns a page-unique id for label/aria wiring. */
export function uid(prefix = 'id') {
  idSeq += 1;
  return `${prefix}-${idSeq}`;
}
