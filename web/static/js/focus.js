// Re-rendering must not steal the keyboard user's place: remember which
// element had focus (by its data-focus-key) and focus its successor.

export function keepFocus(root, render) {
  const active = document.activeElement;
  const key = active && root.contains(active) ? active.dataset.focusKey : undefined;
  const scroll = window.scrollY;
  render();
  if (key) {
    const next = root.querySelector(`[data-focus-key="${CSS.escape(key)}"]`);
    if (next) next.focus({ preventScroll: true });
  }
  window.scrollTo(0, scroll);
}
