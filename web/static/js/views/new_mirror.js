// Create a mirror: the form, then a check (a dry run that also contacts
// the source), and only after a passing check of the same input, create.

import { post, seg } from '../api.js';
import { h, replace } from '../dom.js';
import { field, button } from '../dialogs.js';
import { toast } from '../toast.js';

const PROTOCOLS = ['PLAINTEXT', 'SSL', 'SASL_PLAINTEXT', 'SASL_SSL'];
const MECHANISMS = ['PLAIN', 'SCRAM-SHA-256', 'SCRAM-SHA-512', 'AWS_MSK_IAM', 'OAUTHBEARER'];

// parseExtensions reads SASL extensions, one KEY=VALUE a line. A line
// without = is a key without a value, which the server's check refuses
// with the key's name.
function parseExtensions(text) {
  const out = {};
  for (const line of text.split('\n')) {
    const t = line.trim();
    if (!t) continue;
    const i = t.indexOf('=');
    if (i < 0) out[t] = '';
    else out[t.slice(0, i).trim()] = t.slice(i + 1).trim();
  }
  return out;
}

export function newMirrorPage({ session, main }) {
  if (!session.canAdmin) {
    replace(main, h('section', { class: 'empty-state' }, h('h1', {}, 'New mirror'), h('p', {}, `Creating a mirror needs an admin token; yours is ${session.role}.`)));
    return { refresh: async () => {} };
  }
  const f = {
    name: h('input', { type: 'text', name: 'name', required: true, autocomplete: 'off', spellcheck: 'false', pattern: '[a-zA-Z0-9._\\-]{1,249}' }),
    servers: h('input', { type: 'text', name: 'bootstrap', required: true, autocomplete: 'off', spellcheck: 'false', class: 'mono', placeholder: 'host1:9092,host2:9092' }),
    protocol: h('select', { name: 'protocol' }, PROTOCOLS.map((p) => h('option', { value: p }, p))),
    mechanism: h('select', { name: 'mechanism' }, MECHANISMS.map((m) => h('option', { value: m }, m))),
    user: h('input', { type: 'text', name: 'user', autocomplete: 'off' }),
    password: h('input', { type: 'password', name: 'password', autocomplete: 'new-password' }),
    awsKeyID: h('input', { type: 'text', name: 'aws-access-key-id', autocomplete: 'off', spellcheck: 'false', class: 'mono' }),
    awsSecret: h('input', { type: 'password', name: 'aws-secret-access-key', autocomplete: 'new-password' }),
    awsToken: h('input', { type: 'password', name: 'aws-session-token', autocomplete: 'new-password' }),
    awsRegion: h('input', { type: 'text', name: 'aws-region', autocomplete: 'off', spellcheck: 'false', class: 'mono', placeholder: 'us-east-1' }),
    tokenURL: h('input', { type: 'url', name: 'oauth-token-endpoint-url', autocomplete: 'off', spellcheck: 'false', class: 'mono', placeholder: 'the token endpoint (an https URL)' }),
    clientID: h('input', { type: 'text', name: 'oauth-client-id', autocomplete: 'off', spellcheck: 'false' }),
    clientSecret: h('input', { type: 'password', name: 'oauth-client-secret', autocomplete: 'new-password' }),
    scope: h('input', { type: 'text', name: 'oauth-scope', autocomplete: 'off', spellcheck: 'false' }),
    extensions: h('textarea', { name: 'oauth-extensions', rows: '2', class: 'mono', spellcheck: 'false', placeholder: 'logicalCluster=lkc-abc123' }),
    ca: h('textarea', { name: 'ca', rows: '3', class: 'mono', spellcheck: 'false' }),
    cert: h('textarea', { name: 'cert', rows: '3', class: 'mono', spellcheck: 'false' }),
    key: h('textarea', { name: 'key', rows: '3', class: 'mono', spellcheck: 'false' }),
    serverName: h('input', { type: 'text', name: 'server-name', autocomplete: 'off' }),
    // topic.name.prefix: set here, as it is fixed once the mirror has topics.
    prefix: h('input', { type: 'text', name: 'topic-name-prefix', autocomplete: 'off', spellcheck: 'false', class: 'mono', pattern: '[a-zA-Z0-9._\\-]{0,200}', placeholder: 'east.' }),
    // source.schema_registry: its URLs, and basic auth when it needs it.
    registryURLs: h('input', { type: 'text', name: 'schema-registry-urls', autocomplete: 'off', spellcheck: 'false', class: 'mono' }),
    registryUser: h('input', { type: 'text', name: 'schema-registry-user', autocomplete: 'off', spellcheck: 'false' }),
    registryPassword: h('input', { type: 'password', name: 'schema-registry-password', autocomplete: 'new-password' }),
  };
  // Each mechanism's own fields; the others' are hidden and not sent.
  const userPass = h('div', {}, field('Username', f.user), field('Password', f.password, 'Write-only: never shown again.'));
  const aws = h('div', {},
    field('Access key id (optional)', f.awsKeyID, 'Empty: the server’s own AWS identity signs in (its environment, EKS service account role, shared config or instance role).'),
    field('Secret access key', f.awsSecret, 'Write-only. With an access key id only.'),
    field('Session token (optional)', f.awsToken, 'Write-only. For temporary keys.'),
    field('Region (optional)', f.awsRegion, 'Of the default credential chain. Requests are signed for the region in the brokers’ host names.'));
  const oauth = h('div', {},
    field('Token endpoint URL', f.tokenURL, 'The identity provider’s OAuth 2.0 token endpoint (https), asked with the client credentials grant.'),
    field('Client id', f.clientID), field('Client secret', f.clientSecret, 'Write-only: never shown again.'),
    field('Scope (optional)', f.scope, 'Scopes separated by spaces.'),
    field('SASL extensions (optional)', f.extensions, 'One KEY=VALUE a line, such as Confluent Cloud’s logicalCluster and identityPoolId.'));
  const sasl = h('fieldset', { class: 'group' }, h('legend', {}, 'SASL'), field('Mechanism', f.mechanism), userPass, aws, oauth);
  const tls = h('fieldset', { class: 'group' }, h('legend', {}, 'TLS'),
    field('CA certificates (PEM)', f.ca, 'Empty trusts the system roots.'), field('Client certificate (PEM)', f.cert),
    field('Client key (PEM)', f.key, 'Write-only.'), field('Server name', f.serverName, 'Empty uses the host dialled.'));
  const showSecurity = () => {
    const p = f.protocol.value;
    sasl.hidden = !p.startsWith('SASL');
    tls.hidden = !(p === 'SSL' || p === 'SASL_SSL');
    const m = f.mechanism.value;
    aws.hidden = m !== 'AWS_MSK_IAM';
    oauth.hidden = m !== 'OAUTHBEARER';
    userPass.hidden = !aws.hidden || !oauth.hidden;
  };
  f.protocol.addEventListener('change', showSecurity);
  f.mechanism.addEventListener('change', showSecurity);
  showSecurity();

  const result = h('div', { class: 'dlg-status', role: 'status', 'aria-live': 'polite' });
  let checked = null; // JSON of the body that passed the check
  const body = () => {
    const src = { bootstrap_servers: f.servers.value.trim(), security_protocol: f.protocol.value };
    if (!sasl.hidden) {
      src.sasl_mechanism = f.mechanism.value;
      if (!userPass.hidden) Object.assign(src, { sasl_username: f.user.value, sasl_password: f.password.value });
      const set = (pairs) => { for (const [k, el] of pairs) if (el.value.trim()) src[k] = el.value.trim(); };
      if (!aws.hidden) set([['aws_access_key_id', f.awsKeyID], ['aws_secret_access_key', f.awsSecret], ['aws_session_token', f.awsToken], ['aws_region', f.awsRegion]]);
      if (!oauth.hidden) {
        set([['sasl_oauthbearer_token_endpoint_url', f.tokenURL], ['sasl_oauthbearer_client_id', f.clientID],
          ['sasl_oauthbearer_client_secret', f.clientSecret], ['sasl_oauthbearer_scope', f.scope]]);
        const ext = parseExtensions(f.extensions.value);
        if (Object.keys(ext).length) src.sasl_oauthbearer_extensions = ext;
      }
    }
    if (!tls.hidden) {
      for (const [k, el] of [['tls_ca_pem', f.ca], ['tls_cert_pem', f.cert], ['tls_key_pem', f.key], ['tls_server_name', f.serverName]]) {
        if (el.value.trim()) src[k] = el.value.trim();
      }
    }
    const b = { name: f.name.value.trim(), source: src };
    const prefix = f.prefix.value.trim();
    if (prefix) b.config = { 'topic.name.prefix': prefix };
    const urls = f.registryURLs.value.split(',').map((u) => u.trim()).filter(Boolean);
    if (urls.length) {
      src.schema_registry = { urls };
      if (f.registryUser.value.trim()) {
        Object.assign(src.schema_registry, { basic_auth_username: f.registryUser.value.trim(), basic_auth_password: f.registryPassword.value });
      }
    }
    return b;
  };
  const create = button('Create mirror', async () => {
    const b = body();
    if (JSON.stringify(b) !== checked) return;
    create.disabled = true;
    try {
      await post('/v1/mirrors', b);
      toast(`Created mirror ${b.name}. Add topics to start mirroring.`);
      location.hash = `#/mirrors/${seg(b.name)}`;
    } catch (err) {
      result.replaceChildren(h('p', { class: 'error', role: 'alert' }, h('strong', {}, 'Not created: '), err.message));
      create.disabled = false;
    }
  }, { primary: true, disabled: true });
  const check = button('Check connection', async () => {
    const b = body();
    check.disabled = true;
    result.replaceChildren(h('p', {}, `Contacting ${b.source.bootstrap_servers || 'the source'}…`));
    try {
      await post('/v1/mirrors', b, { dry_run: true });
      checked = JSON.stringify(b);
      result.replaceChildren(h('p', { class: 'ok' }, `The source answered and mirror ${b.name} is valid. Nothing was written yet.`));
      create.disabled = false;
      create.focus();
    } catch (err) {
      checked = null;
      create.disabled = true;
      result.replaceChildren(h('p', { class: 'error', role: 'alert' }, h('strong', {}, 'Check failed: '), err.message));
    } finally {
      check.disabled = false;
    }
  });
  const form = h('form', { class: 'card form', onsubmit: (e) => { e.preventDefault(); check.click(); } },
    field('Name', f.name, 'Letters, digits, dot, underscore and dash.'),
    field('Source bootstrap servers', f.servers, 'Comma-separated host:port list of the source cluster.'),
    field('Security protocol', f.protocol),
    sasl, tls,
    field('Topic name prefix (optional)', f.prefix,
      'Each destination topic is named this prefix and its source topic’s name: east. writes orders to east.orders, so that mirrors of several sources can write the same names into this destination side by side. Empty keeps the source names. Fixed once the mirror has topics.'),
    h('fieldset', { class: 'group' }, h('legend', {}, 'Source Schema Registry (optional)'),
      field('Schema Registry URLs', f.registryURLs,
        'Comma-separated http(s) URLs of the source cluster’s registry. Its subjects of the mirrored topics are copied, ids kept, into the destination registry of the servers (--destination-schema-registry-url). Empty: no schemas are copied.'),
      field('Registry user (optional)', f.registryUser, 'Basic auth, such as a Confluent Cloud API key.'),
      field('Registry password', f.registryPassword, 'Write-only: never shown again. With a user only.')),
    h('p', { class: 'hint' }, 'The other configuration keys start at their defaults; edit them on the mirror’s page after creating it.'),
    result,
    h('div', { class: 'actions' }, check, create));
  form.addEventListener('input', () => {
    if (checked && JSON.stringify(body()) !== checked) {
      checked = null;
      create.disabled = true;
      result.replaceChildren(h('p', { class: 'muted' }, 'The input changed: check again before creating.'));
    }
  });
  replace(main, h('h1', {}, 'New mirror'), form);
  f.name.focus();
  return { refresh: async () => {} };
}
