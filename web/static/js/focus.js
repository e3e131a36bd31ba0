// Re-rendering must not steal the keyboard user's place: remember which
// element had focus (by its data-focus-key) and focus its successor. When
// the successor is gone (an action removed the button), focus goes to what
// took its place nearby rather than falling to the page.

// trailDepth is how many ancestors of the focused element offer a fallback.
const trailDepth = 4;

/**
 * focusTrail lists the focus keys to try for el, best first: its own, then
 * for each of its nearest ancestors the first other key inside it (the
 * neighbouring button, then the topic's toggle, ...).
 */
export function focusTrail(el) {
  const keys = el?.dataset?.focusKey ? [el.dataset.focusKey] : [];
  let a = el?.parentElement;
  for (let i = 0; a && a !== document.body && i < trailDepth; i++, a = a.parentElement) {
    const near = [...a.querySelectorAll('[data-focus-key]')].find((c) => c !== el && !keys.includes(c.dataset.focusKey));
    if (near) keys.push(near.dataset.focusKey);
  }
  return keys;
}

/** findOnTrail returns the first element under root that a key of trail names. */
export function findOnTrail(root, trail) {
  for (const k of trail) {
    const el = root.querySelector(`[data-focus-key="${CSS.escape(k)}"]`);
    if (el) return el;
  }
  return null;
}

export function keepFocus(root, render) {
  const active = document.activeElement;
  const trail = active && root.contains(active) && active.dataset.focusKey ? focusTrail(active) : [];
  const scroll = window.scrollY;
  render();
  findOnTrail(root, trail)?.focus({ preventScroll: true });
  window.scrollTo(0, scroll);
}
