// The token prompt, shown when the server has API tokens and the browser
// session has none that works. The token is kept in sessionStorage only.

import { token } from '../api.js';
import { h, replace } from '../dom.js';
import { field } from '../dialogs.js';

export function tokenPage(main, message, onDone) {
  const input = h('input', { type: 'password', name: 'token', autocomplete: 'off', required: true, spellcheck: 'false' });
  const form = h('form', {
    class: 'card narrow',
    onsubmit: (e) => {
      e.preventDefault();
      token.set(input.value.trim());
      onDone();
    },
  },
  h('h1', {}, 'Sign in'),
  h('p', {}, 'This kmirror server needs an API token. It is kept for this browser tab only and forgotten when the tab closes.'),
  message ? h('p', { class: 'error', role: 'alert' }, message) : null,
  field('API token', input, 'A viewer token shows; an operator token also acts on topics; an admin token also creates, edits and deletes mirrors.'),
  h('div', { class: 'actions' }, h('button', { type: 'submit', class: 'btn primary' }, 'Sign in')));
  replace(main, form);
  input.focus();
}
