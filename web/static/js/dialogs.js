// Modal dialogs on the native <dialog>: it traps focus, closes on Escape
// and gives focus back to what opened it. Every action runs inside one, so
// the user sees what it will touch before it acts and reads the result or
// the server's error in the same place.

import { h, uid } from './dom.js';
import { toast } from './toast.js';
import { focusTrail, findOnTrail } from './focus.js';

/**
 * modal opens a dialog titled title. It returns the parts to fill: body,
 * a status line and a footer for buttons.
 */
export function modal(title, { wide = false } = {}) {
  const titleId = uid('dlg');
  const status = h('div', { class: 'dlg-status', role: 'status', 'aria-live': 'polite' });
  const body = h('div', { class: 'dlg-body' });
  const footer = h('div', { class: 'dlg-footer' });
  const el = h('dialog', { class: `modal${wide ? ' wide' : ''}`, 'aria-labelledby': titleId },
    h('form', { method: 'dialog', class: 'dlg-form', onsubmit: (e) => e.preventDefault() },
      h('h2', { id: titleId }, title), body, status, footer));
  const opener = document.activeElement;
  const trail = opener?.dataset?.focusKey ? focusTrail(opener) : [];
  el.addEventListener('close', () => {
    el.remove();
    // The page may have re-rendered meanwhile: then focus the opener's
    // successor, found by its focus key, or what took its place nearby.
    const back = opener?.isConnected ? opener : findOnTrail(document, trail);
    back?.focus();
  });
  document.body.append(el);
  el.showModal();
  return {
    el,
    body,
    status,
    footer,
    close: () => el.close(),
    /** note shows a plain message; error shows the server's words as an alert. */
    note(text) {
      status.replaceChildren(h('p', {}, text));
    },
    error(err) {
      status.replaceChildren(h('p', { class: 'error', role: 'alert' }, h('strong', {}, 'Not done: '), err.message || String(err)));
    },
    clear() {
      status.replaceChildren();
    },
  };
}

/** button builds a dialog button. */
export function button(label, onclick, { primary = false, danger = false, disabled = false } = {}) {
  return h('button', { type: 'button', class: `btn${primary ? ' primary' : ''}${danger ? ' danger' : ''}`, onclick, disabled }, label);
}

/**
 * runAction runs fn with the confirm button busy; on success it shows
 * done() in the dialog and a toast, and turns the footer into Close.
 * done returns a sentence, an element, or { node, text }: an element with
 * the toast's sentence. On an error, refused(err) may show it in its own
 * way and return true; otherwise the dialog shows the server's words.
 */
export async function runAction(dlg, confirmBtn, fn, done, { refused } = {}) {
  confirmBtn.disabled = true;
  const was = confirmBtn.textContent;
  confirmBtn.textContent = 'Working…';
  confirmBtn.setAttribute('aria-busy', 'true');
  dlg.clear();
  try {
    const result = await fn();
    const msg = done(result);
    const content = typeof msg === 'string' ? h('p', { class: 'ok' }, msg) : (msg.node || msg);
    dlg.status.replaceChildren(content);
    const close = button('Close', () => dlg.close(), { primary: true });
    dlg.footer.replaceChildren(close);
    close.focus();
    toast(typeof msg === 'string' ? msg : (msg.text || `${dlg.el.querySelector('h2').textContent}: done.`));
    return result;
  } catch (err) {
    confirmBtn.textContent = was;
    confirmBtn.disabled = false;
    confirmBtn.removeAttribute('aria-busy');
    if (!refused?.(err)) dlg.error(err);
    return undefined;
  }
}

/**
 * field builds a labelled input: label text, the input element, an
 * optional hint. Returns the wrapper.
 */
export function field(label, input, hint) {
  const id = input.id || uid('f');
  input.id = id;
  let hintEl = null;
  if (hint) {
    hintEl = h('p', { class: 'hint', id: `${id}-hint` }, hint);
    input.setAttribute('aria-describedby', hintEl.id);
  }
  return h('div', { class: 'field' }, h('label', { for: id }, label), input, hintEl);
}
