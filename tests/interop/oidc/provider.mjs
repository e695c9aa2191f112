// provider.mjs - a small but real OpenID Provider (npm `oidc-provider`, pinned in
// package.json beside this file) for Bulkhead's integration tests. Loopback, plain http,
// in-memory state, scriptable with plain HTTP (see browser.py).
//
// Install (once, outside the source tree):
//   mkdir -p "$CARGO_TARGET_DIR/oidc-provider" && cp tests/interop/oidc/package.json "$_/"
//   (cd "$CARGO_TARGET_DIR/oidc-provider" && npm install --no-audit --no-fund)
// Run:
//   node tests/interop/oidc/provider.mjs PORT CONFIG.json NODE_MODULES_DIR
//   PORT 0 picks a free port. CONFIG may come from $OIDC_CONFIG, NODE_MODULES_DIR from
//   $OIDC_NODE_MODULES or the first entry of $NODE_PATH. ESM ignores NODE_PATH, so this
//   script imports oidc-provider by absolute path from that directory itself.
// Output: exactly one line on stdout when ready, {"issuer": "http://127.0.0.1:N", "port": N};
// everything else (oidc-provider notices included) goes to stderr. Exits on SIGTERM/SIGINT
// and, when stdin is a pipe, as soon as stdin closes (spawn with stdin piped: no orphans).
//
// Config (JSON): see smoke.py / the report for an example.
//   clients: oidc-provider client metadata (client_id, client_secret, redirect_uris,
//            grant_types, token_endpoint_auth_method "none" for public clients, ...)
//   users:   [{"id": "alice", "email": ..., "name": ...}]  (any extra keys become claims)
//   resource: default resource indicator (absolute URI, e.g. "urn:bulkhead");
//   audience: its `aud` value (default: resource); resources: extra targets for
//            token exchange, strings or {"resource", "audience"};
//   resource_scopes (default ["read","write"]), signing_alg ("RS256"|"ES256", default
//   RS256), access_token_ttl (s, default 3600), pkce_required (default true),
//   access_token_claims (user claims copied into access tokens, e.g. ["email"]);
//   opaque (default false): oidc-provider's own default, an opaque access token for its
//            user-info endpoint unless a request names a `resource` (the resource scopes are
//            then granted as plain scopes, as providers without resource indicators do).
import * as crypto from 'node:crypto';
import * as fs from 'node:fs';
import * as http from 'node:http';
import * as path from 'node:path';
import { pathToFileURL } from 'node:url';

// oidc-provider prints NOTICEs with console.info (stdout): keep stdout for the ready line.
console.log = console.info = (...a) => console.error(...a);

const [portArg = '0', cfgArg = process.env.OIDC_CONFIG] = process.argv.slice(2);
const modules = process.argv[4] || process.env.OIDC_NODE_MODULES
  || (process.env.NODE_PATH || '').split(path.delimiter).find(Boolean)
  || path.join(path.dirname(new URL(import.meta.url).pathname), 'node_modules');
const pkgDir = path.resolve(modules, 'oidc-provider');
const main = JSON.parse(fs.readFileSync(path.join(pkgDir, 'package.json'), 'utf8')).main || 'lib/index.js';
const { default: Provider, errors } = await import(pathToFileURL(path.join(pkgDir, main)).href);

const cfg = cfgArg ? JSON.parse(fs.readFileSync(cfgArg, 'utf8')) : {};
const RESOURCE_SCOPES = cfg.resource_scopes || ['read', 'write'];
const ALG = cfg.signing_alg || 'RS256';
const OIDC_SCOPES = ['openid', 'offline_access', 'profile', 'email'];
const TE = 'urn:ietf:params:oauth:grant-type:token-exchange';
const TT_AT = 'urn:ietf:params:oauth:token-type:access_token';
const TT_JWT = 'urn:ietf:params:oauth:token-type:jwt';

// Resource servers: indicator -> audience. All issue JWT access tokens signed with our key.
const DEFAULT_RESOURCE = cfg.resource || 'urn:bulkhead';
const resources = new Map([[DEFAULT_RESOURCE, cfg.audience || DEFAULT_RESOURCE]]);
for (const r of cfg.resources || []) {
  if (typeof r === 'string') resources.set(r, r);
  else resources.set(r.resource, r.audience || r.resource);
}
for (const r of resources.keys()) new URL(r); // RFC 8707: must be absolute URIs (throws otherwise)
const rsInfo = (indicator) => ({
  audience: resources.get(indicator),
  scope: RESOURCE_SCOPES.join(' '),
  accessTokenFormat: 'jwt',
  accessTokenTTL: cfg.access_token_ttl || 3600,
  jwt: { sign: { alg: ALG } },
});

const users = new Map((cfg.users || []).map((u) => [u.id || u.sub, u]));

// The provider's one signing key (published in the JWKS); also used to verify subject tokens.
const kp = ALG === 'ES256'
  ? crypto.generateKeyPairSync('ec', { namedCurve: 'P-256' })
  : crypto.generateKeyPairSync('rsa', { modulusLength: 2048 });
const KID = crypto.randomBytes(8).toString('hex');
const jwk = { ...kp.privateKey.export({ format: 'jwk' }), kid: KID, alg: ALG, use: 'sig' };

// Verify a JWT access token issued by this provider (signature, kid, typ, iss, exp).
function verifyOwnJwt(token, issuer, what) {
  const bad = (m) => new errors.InvalidGrant(`${what} ${m}`);
  const parts = String(token).split('.');
  if (parts.length !== 3) throw bad('is not a JWT');
  let header, claims;
  try {
    header = JSON.parse(Buffer.from(parts[0], 'base64url'));
    claims = JSON.parse(Buffer.from(parts[1], 'base64url'));
  } catch { throw bad('is malformed'); }
  if (header.alg !== ALG || header.kid !== KID || header.typ !== 'at+jwt') throw bad('has an unexpected header');
  const key = ALG === 'ES256' ? { key: kp.publicKey, dsaEncoding: 'ieee-p1363' } : kp.publicKey;
  const ok = crypto.verify('sha256', Buffer.from(`${parts[0]}.${parts[1]}`), key, Buffer.from(parts[2], 'base64url'));
  if (!ok) throw bad('signature is invalid');
  if (claims.iss !== issuer) throw bad('has a foreign issuer');
  if (typeof claims.exp !== 'number' || claims.exp <= Math.floor(Date.now() / 1000)) throw bad('is expired');
  if (![...resources.values()].includes(claims.aud)) throw bad('has an unknown audience');
  return claims;
}

const actClaims = new WeakMap(); // token-exchange AccessToken -> { act: {...} }

// Grant everything the request asks for (scripted consent; also used right after login).
async function autoGrant(ctx) {
  const { client, session, params, provider, resourceServers } = ctx.oidc;
  if (!session?.accountId) return undefined;
  const id = ctx.oidc.result?.consent?.grantId || session.grantIdFor(client.clientId);
  let grant = id ? await provider.Grant.find(id) : undefined;
  if (!grant || grant.accountId !== session.accountId) {
    grant = new provider.Grant({ clientId: client.clientId, accountId: session.accountId });
  }
  const scopes = String(params.scope || '').split(' ').filter(Boolean);
  const plain = (s) => OIDC_SCOPES.includes(s) || (cfg.opaque && RESOURCE_SCOPES.includes(s));
  grant.addOIDCScope(scopes.filter(plain).join(' '));
  if (params.claims) {
    try {
      const c = typeof params.claims === 'string' ? JSON.parse(params.claims) : params.claims;
      grant.addOIDCClaims([...Object.keys(c.userinfo || {}), ...Object.keys(c.id_token || {})]);
    } catch { /* invalid claims are rejected by the provider itself */ }
  }
  for (const [indicator, rs] of Object.entries(resourceServers || {})) {
    grant.addResourceScope(indicator, scopes.filter((s) => rs.scopes.has(s)).join(' '));
  }
  await grant.save();
  return grant;
}

const clients = (cfg.clients || []).map((c) => {
  const grantTypes = c.grant_types || ['authorization_code', 'refresh_token'];
  return {
    response_types: grantTypes.includes('authorization_code') ? ['code'] : [],
    redirect_uris: [],
    ...c,
    grant_types: grantTypes,
  };
});

const configuration = {
  clients,
  responseTypes: ['code', 'none'], // no implicit/hybrid
  jwks: { keys: [jwk] },
  cookies: { keys: [crypto.randomBytes(32).toString('hex')] },
  scopes: [...OIDC_SCOPES, ...RESOURCE_SCOPES],
  claims: { openid: ['sub'], email: ['email', 'email_verified'], profile: ['name'] },
  conformIdTokenClaims: false, // put scope-granted claims (email, name) into ID tokens too
  clientDefaults: { id_token_signed_response_alg: ALG },
  enabledJWA: { idTokenSigningAlgValues: [ALG], userinfoSigningAlgValues: [ALG] },
  async findAccount(ctx, id) {
    const u = users.get(id);
    if (!u) return undefined;
    return {
      accountId: id,
      async claims() {
        const { id: _i, sub: _s, ...rest } = u;
        return { email_verified: !!u.email, ...rest, sub: id };
      },
    };
  },
  loadExistingGrant: autoGrant,
  ttl: {
    AccessToken: 3600, ClientCredentials: 3600, IdToken: 3600, RefreshToken: 86400,
    DeviceCode: 600, Interaction: 3600, Session: 86400, Grant: 86400,
  },
  // Always issue refresh tokens to clients allowed the refresh_token grant (no need for
  // offline_access, which oidc-provider drops unless prompt=consent is also requested).
  issueRefreshToken: async (ctx, client) => client.grantTypeAllowed('refresh_token'),
  // `access_token_claims` (config): user claims also put into access tokens, as providers'
  // custom claims do (e.g. ["email"]).
  extraTokenClaims: async (ctx, token) => {
    const extra = { ...(actClaims.get(token) || {}) };
    const user = token.accountId && users.get(token.accountId);
    for (const name of (user && cfg.access_token_claims) || []) {
      if (user[name] !== undefined) extra[name] = user[name];
    }
    return extra;
  },
  pkce: { required: () => cfg.pkce_required !== false },
  clientBasedCORS: () => true,
  interactions: { url: (ctx, interaction) => `/interaction/${interaction.uid}` },
  renderError: async (ctx, out) => { ctx.type = 'text'; ctx.body = JSON.stringify(out); },
  features: {
    devInteractions: { enabled: false },
    registration: { enabled: true }, // open dynamic client registration
    deviceFlow: {
      enabled: true,
      successSource: async (ctx) => { ctx.type = 'html'; ctx.body = '<p id="device-success">Sign-in Success</p>'; },
    },
    clientCredentials: { enabled: true },
    introspection: { enabled: true },
    revocation: { enabled: true },
    resourceIndicators: {
      enabled: true,
      // No `resource` param -> the configured default resource (so ATs are always JWTs).
      defaultResource: async (ctx, client, oneOf) => {
        if (oneOf) return oneOf.includes(DEFAULT_RESOURCE) ? DEFAULT_RESOURCE : oneOf;
        return cfg.opaque ? undefined : DEFAULT_RESOURCE;
      },
      useGrantedResource: async () => true,
      getResourceServerInfo: async (ctx, indicator) => {
        if (!resources.has(indicator)) throw new errors.InvalidTarget(`unknown resource ${indicator}`);
        return rsInfo(indicator);
      },
    },
  },
};

// Tiny scriptable interaction UI: GET shows a form, POST .../login logs in + consents.
const esc = (s) => String(s).replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);
async function interaction(provider, req, res, uid, isPost) {
  const details = await provider.interactionDetails(req, res);
  if (details.uid !== uid) throw new Error('interaction mismatch');
  if (!isPost) {
    res.setHeader('content-type', 'text/html; charset=utf-8');
    res.end(`<!DOCTYPE html><title>Sign-in</title><p>${esc(details.prompt.name)} for ${esc(details.params.client_id)}</p>
<form method="post" action="/interaction/${esc(uid)}/login"><input name="login" value=""><button type="submit">Sign in</button></form>`);
    return;
  }
  let body = '';
  for await (const chunk of req) body += chunk;
  const login = new URLSearchParams(body).get('login') || '';
  const result = {};
  if (details.prompt.name === 'login') {
    if (!users.has(login)) { res.statusCode = 403; res.end(`unknown account ${login}\n`); return; }
    result.login = { accountId: login };
  } else if (details.prompt.name === 'consent') {
    const { missingOIDCScope = [], missingOIDCClaims = [], missingResourceScopes = {} } = details.prompt.details;
    const grant = details.grantId ? await provider.Grant.find(details.grantId)
      : new provider.Grant({ accountId: details.session.accountId, clientId: details.params.client_id });
    if (missingOIDCScope.length) grant.addOIDCScope(missingOIDCScope.join(' '));
    if (missingOIDCClaims.length) grant.addOIDCClaims(missingOIDCClaims);
    for (const [ind, sc] of Object.entries(missingResourceScopes)) grant.addResourceScope(ind, sc.join(' '));
    result.consent = { grantId: await grant.save() };
  }
  await provider.interactionFinished(req, res, result, { mergeWithLastSubmission: false });
}

// Listen first (port 0 => free port), then build the provider for the real issuer.
let handler = (req, res) => { res.statusCode = 503; res.end(); };
const server = http.createServer((req, res) => handler(req, res));
await new Promise((ok) => server.listen(Number(portArg), '127.0.0.1', ok));
const { port } = server.address();
const issuer = `http://127.0.0.1:${port}`;
const provider = new Provider(issuer, configuration);

// RFC 8693 token exchange: subject_token = an access token JWT from this provider ->
// JWT access token (same sub) for the requested `resource`/`audience` (default resource).
provider.registerGrantType(TE, async (ctx, next) => {
  const p = ctx.oidc.params;
  const tokenTypes = [TT_AT, TT_JWT];
  if (!p.subject_token || !tokenTypes.includes(p.subject_token_type)) {
    throw new errors.InvalidRequest('subject_token with subject_token_type access_token or jwt is required');
  }
  if (p.requested_token_type && !tokenTypes.includes(p.requested_token_type)) {
    throw new errors.InvalidRequest('only access tokens can be requested');
  }
  const subject = verifyOwnJwt(p.subject_token, issuer, 'subject_token');
  let act;
  if (p.actor_token) {
    if (!tokenTypes.includes(p.actor_token_type)) throw new errors.InvalidRequest('actor_token_type is required');
    const actor = verifyOwnJwt(p.actor_token, issuer, 'actor_token');
    act = { sub: actor.sub, ...(subject.act ? { act: subject.act } : {}) };
  } else if (subject.act) act = subject.act;
  let indicator = DEFAULT_RESOURCE;
  if (p.resource) indicator = p.resource;
  else if (p.audience) {
    indicator = [...resources].find(([r, a]) => a === p.audience || r === p.audience)?.[0];
  }
  if (!indicator || !resources.has(indicator)) throw new errors.InvalidTarget('unknown resource/audience');
  const held = new Set(String(subject.scope || '').split(' ').filter(Boolean));
  const wanted = p.scope ? p.scope.split(' ') : [...held];
  const excess = wanted.filter((s) => !held.has(s));
  if (excess.length) throw new errors.InvalidScope('scope exceeds the subject_token scope', excess.join(' '));
  const scope = wanted.filter((s) => RESOURCE_SCOPES.includes(s)).join(' ') || undefined;
  const at = new provider.AccessToken({
    accountId: subject.sub, client: ctx.oidc.client, scope, gty: 'token_exchange',
  });
  at.resourceServer = new provider.ResourceServer(indicator, rsInfo(indicator));
  if (act) actClaims.set(at, { act });
  ctx.oidc.entity('AccessToken', at);
  const value = await at.save();
  ctx.body = {
    access_token: value, issued_token_type: TT_AT, token_type: 'Bearer', expires_in: at.expiration, scope,
  };
  await next();
}, ['subject_token', 'subject_token_type', 'actor_token', 'actor_token_type', 'requested_token_type',
  'audience', 'resource', 'scope']);

const callback = provider.callback();
handler = (req, res) => {
  const m = /^\/interaction\/([\w-]+)(\/login)?$/.exec(new URL(req.url, issuer).pathname);
  if (!m) return callback(req, res);
  return interaction(provider, req, res, m[1], req.method === 'POST' && !!m[2]).catch((err) => {
    console.error('interaction error:', err);
    if (!res.headersSent) res.statusCode = 400;
    res.end(`${err.name}: ${err.message}\n`);
  });
};
provider.on('server_error', (ctx, err) => console.error('server_error:', err));

process.stdout.write(`{"issuer": ${JSON.stringify(issuer)}, "port": ${port}}\n`);
const quit = () => process.exit(0);
process.on('SIGTERM', quit);
process.on('SIGINT', quit);
try {
  if (fs.fstatSync(0).isFIFO() || fs.fstatSync(0).isSocket()) {
    process.stdin.on('end', quit).on('close', quit).resume();
  }
} catch { /* no stdin at all */ }
