#!/usr/bin/env node
// A test Kubernetes API server: the subset of the REST API that dowser and
// kubectl use, over TLS with its own CA, in memory. Node.js built-ins only.
// See README.md for what is implemented and what is not.
import fs from 'node:fs';
import https from 'node:https';
import path from 'node:path';
import { parseArgs } from 'node:util';
import crypto from 'node:crypto';

import { Api } from './lib/api.mjs';
import { OPENAPI_V2_PROTOBUF, OpenApi, openApiV2 } from './lib/openapi.mjs';
import { Registry } from './lib/registry.mjs';
import { Store } from './lib/store.mjs';
import { ApiError, errors } from './lib/status.mjs';

const USAGE = `usage: node apiserver.mjs --pki DIR --token-file FILE [--port N] [--ready-file PATH]
         [--bookmark-interval-ms N] [--history N] [--log FILE] [--owner-pid PID] [--forbid RESOURCE]...
         [--forbid-file FILE] [--watch-errors-without-code] [--throttle-writes N]
         [--hold-lists-while PATH [--hold-lists-of RESOURCE]...]
  --pki DIR                 ca.crt, server.crt, server.key (make-pki.sh DIR); DIR/kubeconfig is written
  --token-file FILE         the accepted bearer token, re-read on every request
  --port N                  port on 127.0.0.1 (default 0: any free port)
  --ready-file PATH         receives the port, atomically, once listening
  --bookmark-interval-ms N  BOOKMARK period of watches asking for bookmarks (default 60000)
  --history N               watch events kept for resuming watches (default 1000); older: 410 Expired
  --log FILE                one line per request
  --owner-pid PID           exit when that process is gone (checked every 500 ms)
  --forbid RESOURCE         answer every request on RESOURCE ("secrets", "instances.akri.sh") with
                            RBAC's 403 Forbidden; repeatable
  --forbid-file FILE        more resources to forbid, one per line, re-read on every request (an
                            RBAC change while clients run); a missing file forbids nothing
  --watch-errors-without-code  a watch's ERROR event gives the Status's reason but no code (as
                            client-go allows: it reads the reason)
  --throttle-writes N       answer the first N writes (POST, PUT, PATCH, DELETE) with 429 Too Many
                            Requests and Retry-After: 1, as API Priority and Fairness does
  --hold-lists-while PATH   a list (a GET of a collection, not a watch) waits while PATH exists,
                            then answers with the objects of that moment, as a slow server does;
                            PATH.waiting is created once a list waits
  --hold-lists-of RESOURCE  only lists of RESOURCE ("secrets", "configurations.akri.sh") wait;
                            repeatable (default: every list waits)`;

const MAX_BODY_BYTES = 3 * 1024 * 1024;  // the real server's request size limit
const DEFAULT_WATCH_SECONDS = 1800;

function parseOptions() {
  const { values } = parseArgs({
    options: {
      pki: { type: 'string' }, 'token-file': { type: 'string' }, port: { type: 'string', default: '0' },
      'ready-file': { type: 'string' }, 'bookmark-interval-ms': { type: 'string', default: '60000' },
      history: { type: 'string', default: '1000' }, log: { type: 'string' }, 'owner-pid': { type: 'string' },
      forbid: { type: 'string', multiple: true, default: [] }, 'forbid-file': { type: 'string' },
      help: { type: 'boolean' },
      'watch-errors-without-code': { type: 'boolean', default: false },
      'throttle-writes': { type: 'string', default: '0' }, 'hold-lists-while': { type: 'string' },
      'hold-lists-of': { type: 'string', multiple: true, default: [] },
    },
  });
  if (values.help) {
    console.log(USAGE);
    process.exit(0);
  }
  const number = (name, minimum) => {
    const value = Number(values[name]);
    if (!Number.isInteger(value) || value < minimum) fail(`--${name} must be an integer >= ${minimum}`);
    return value;
  };
  if (!values.pki || !values['token-file']) fail('--pki and --token-file are required');
  return {
    pki: path.resolve(values.pki), tokenFile: path.resolve(values['token-file']), port: number('port', 0),
    readyFile: values['ready-file'], bookmarkIntervalMs: number('bookmark-interval-ms', 1),
    history: number('history', 1), log: values.log, ownerPid: values['owner-pid'] && number('owner-pid', 1),
    forbidden: new Set(values.forbid), forbidFile: values['forbid-file'] && path.resolve(values['forbid-file']),
    watchErrorsWithoutCode: values['watch-errors-without-code'],
    throttleWrites: number('throttle-writes', 0), holdListsWhile: values['hold-lists-while'],
    holdListsOf: new Set(values['hold-lists-of']),
  };
}

// How RBAC and the options name a resource: "secrets", "instances.akri.sh".
function resourceName(type) {
  return type.group ? `${type.plural}.${type.group}` : type.plural;
}

function fail(message) {
  console.error(`apiserver: ${message}\n${USAGE}`);
  process.exit(2);
}

function writeAtomically(file, text) {
  const temporary = `${file}.tmp-${process.pid}`;
  fs.writeFileSync(temporary, text);
  fs.renameSync(temporary, file);
}

// Three users for one cluster: the token inline (the default context), the
// token file (re-read by kubectl and the C++ client), the client certificate.
function kubeconfig(options, port) {
  const base64 = (file) => fs.readFileSync(path.join(options.pki, file)).toString('base64');
  const token = fs.readFileSync(options.tokenFile, 'utf8').trim();
  const context = (name, user) => `- name: ${name}\n  context:\n    cluster: dowser-test\n    user: ${user}\n    namespace: default\n`;
  return `apiVersion: v1
kind: Config
clusters:
- name: dowser-test
  cluster:
    server: https://127.0.0.1:${port}
    certificate-authority-data: ${base64('ca.crt')}
users:
- name: token
  user:
    token: ${token}
- name: token-file
  user:
    tokenFile: ${options.tokenFile}
- name: client-certificate
  user:
    client-certificate-data: ${base64('client.crt')}
    client-key-data: ${base64('client.key')}
contexts:
${context('dowser-test', 'token')}${context('dowser-test-token-file', 'token-file')}${context('dowser-test-client-certificate', 'client-certificate')}current-context: dowser-test
`;
}

class Server {
  constructor(options) {
    this.options = options;
    this.registry = new Registry();
    this.store = new Store({ historyLimit: options.history });
    this.api = new Api({ store: this.store, registry: this.registry });
    this.openApi = new OpenApi(this.registry);
    this.watches = new Set();  // functions ending each open watch
    this.log = options.log ? fs.createWriteStream(options.log, { flags: 'a' }) : undefined;
    this.writesToThrottle = options.throttleWrites;
  }

  // The union of the real server's authenticators: a client certificate
  // signed by the CA, or the bearer token of the token file.
  authenticate(request) {
    if (request.socket.authorized) return request.socket.getPeerCertificate()?.subject?.CN ?? 'client-certificate';
    const match = /^Bearer\s+(\S+)\s*$/i.exec(request.headers.authorization ?? '');
    if (!match) return undefined;
    let expected;
    try {
      expected = fs.readFileSync(this.options.tokenFile, 'utf8').trim();
    } catch {
      return undefined;
    }
    const given = Buffer.from(match[1]);
    const wanted = Buffer.from(expected);
    return wanted.length && given.length === wanted.length && crypto.timingSafeEqual(given, wanted) ? 'token' : undefined;
  }

  async handle(request, response) {
    const started = Date.now();
    const user = this.authenticate(request);
    response.on('close', () => this.logLine(request, response.statusCode, user, Date.now() - started));
    try {
      if (!user) throw errors.unauthorized();
      if (request.method !== 'GET' && this.writesToThrottle > 0) {
        this.writesToThrottle -= 1;
        throw errors.tooManyRequests();
      }
      const url = new URL(request.url, 'https://127.0.0.1');
      const body = await readBody(request);
      const answer = await this.dispatch(request, response, url, body);
      if (answer !== undefined) send(response, answer.code ?? 200, answer.body, answer.headers);
    } catch (error) {
      if (response.headersSent) {
        response.destroy();
      } else if (error instanceof ApiError) {
        send(response, error.code, error.toStatus(), error.headers);
      } else {
        console.error(error);
        send(response, 500, errors.internal(String(error?.message ?? error)).toStatus());
      }
    }
  }

  logLine(request, status, user, milliseconds) {
    this.log?.write(`${new Date().toISOString()} ${request.method} ${request.url} ${status} user=${user ?? '-'} ${milliseconds}ms\n`);
  }

  // Returns {code, body} or undefined when it answered itself (watch).
  dispatch(request, response, url, body) {
    const segments = url.pathname.split('/').filter((segment) => segment !== '');
    const [root] = segments;
    if (request.method === 'GET' && segments.length <= 1) {
      const document = this.rootDocument(url.pathname);
      if (document) return document;
    }
    if (request.method === 'GET' && root === 'apis' && segments.length === 2) {
      const group = this.registry.apiGroupDocument(segments[1]);
      if (!group) throw errors.noSuchPath();
      return { body: group };
    }
    if (request.method === 'GET' && url.pathname === '/openapi/v2') return { body: openApiV2(request.headers.accept) };
    if (request.method === 'GET' && root === 'openapi' && segments[1] === 'v3') {
      const document = segments.length === 2 ? this.openApi.index() : this.openApi.find(segments.slice(2).join('/'));
      if (!document) throw errors.noSuchPath();
      return { body: document };
    }
    if (root !== 'api' && root !== 'apis') throw errors.noSuchPath();
    const [group, version, rest] = root === 'api' ? ['', segments[1], segments.slice(2)] : [segments[1], segments[2], segments.slice(3)];
    if (!rest.length) {
      if (request.method !== 'GET') throw errors.methodNotAllowed(request.method);
      const list = this.registry.apiResourceList(group, version);
      if (!list) throw errors.noSuchPath();
      return { body: list };
    }
    return this.resourceRequest(request, response, url, body, this.resolve(group, version, rest));
  }

  rootDocument(pathname) {
    switch (pathname) {
      case '/version':
        return { body: { major: '1', minor: '32', gitVersion: 'v1.32.4', gitCommit: 'dowser-test-apiserver', gitTreeState: 'clean',
          buildDate: '2025-01-01T00:00:00Z', goVersion: 'go1.23.6', compiler: 'gc', platform: 'linux/amd64' } };
      case '/healthz': case '/livez': case '/readyz': return { body: 'ok' };
      case '/api': return { body: this.registry.apiVersions(`127.0.0.1:${this.port}`) };
      case '/apis': return { body: this.registry.apiGroupList() };
      default: return undefined;
    }
  }

  // .../[watch/][namespaces/NS/]PLURAL[/NAME[/SUBRESOURCE]]
  resolve(group, version, rest) {
    let segments = rest;
    const legacyWatch = segments[0] === 'watch';
    if (legacyWatch) segments = segments.slice(1);
    let namespace = '';
    if (segments[0] === 'namespaces' && segments.length >= 3 && this.registry.find(group, version, segments[2])?.namespaced) {
      namespace = segments[1];
      segments = segments.slice(2);
    }
    const [plural, name, subresource, ...extra] = segments;
    const type = this.registry.find(group, version, plural);
    if (!type || extra.length || (subresource && !(subresource === 'status' && type.status))) throw errors.noSuchPath();
    return { type, namespace, name, subresource, legacyWatch };
  }

  resourceRequest(request, response, url, body, target) {
    const { type, namespace, name, subresource, legacyWatch } = target;
    const query = url.searchParams;
    const warnings = [];
    const options = { dryRun: query.get('dryRun') === 'All', fieldValidation: query.get('fieldValidation') ?? 'Warn', warnings };
    // The Warning header the real server sends for dropped unknown fields.
    const answer = (code, body) => ({ code, body, headers: warnings.length ? { Warning: warnings.map((text) => `299 - ${JSON.stringify(text)}`) } : {} });
    const watching = legacyWatch || ['true', '1'].includes(query.get('watch'));
    const allNamespaces = type.namespaced && !namespace;
    this.authorize(request, type, namespace, name, watching);
    if (watching) {
      if (request.method !== 'GET') throw errors.methodNotAllowed(request.method);
      if (name) query.set('fieldSelector', [query.get('fieldSelector'), `metadata.name=${name}`].filter(Boolean).join(','));
      this.watch(request, response, type, namespace, query);
      return undefined;
    }
    if (allNamespaces && (request.method !== 'GET' || name)) throw errors.methodNotAllowed(request.method);
    switch (request.method) {
      case 'GET':
        if (name) return answer(200, this.api.get(type, namespace, name));
        return this.listsHeld(type).then(() => answer(200, this.api.list(type, namespace, query)));
      case 'POST':
        if (name) throw errors.methodNotAllowed(request.method);
        requireJson(request);
        return answer(options.dryRun ? 200 : 201, this.api.create(type, namespace, body, options));
      case 'PUT':
        if (!name) throw errors.methodNotAllowed(request.method);
        requireJson(request);
        return answer(200, this.api.update(type, namespace, name, body, { ...options, subresource }));
      case 'PATCH':
        if (!name) throw errors.methodNotAllowed(request.method);
        return answer(200, this.api.patch(type, namespace, name, contentType(request), body, { ...options, subresource }));
      case 'DELETE': {
        const deleteOptions = { ...(body ?? {}) };
        if (query.get('propagationPolicy')) deleteOptions.propagationPolicy = query.get('propagationPolicy');
        if (!name) return answer(200, this.api.deleteCollection(type, namespace, query, deleteOptions));
        return answer(200, this.api.delete(type, namespace, name, deleteOptions, options));
      }
      default:
        throw errors.methodNotAllowed(request.method);
    }
  }

  forbiddenByFile() {
    if (!this.options.forbidFile) return [];
    try {
      return fs.readFileSync(this.options.forbidFile, 'utf8').split('\n').map((line) => line.trim());
    } catch {
      return [];  // no file: nothing forbidden by it
    }
  }

  // --hold-lists-while: resolves once the file is gone (polled every 20 ms).
  async listsHeld(type) {
    const held = this.options.holdListsWhile;
    const only = this.options.holdListsOf;
    if (only.size > 0 && !only.has(resourceName(type))) return;
    if (held && fs.existsSync(held)) fs.writeFileSync(`${held}.waiting`, '');  // a list is held
    while (held && fs.existsSync(held)) await new Promise((resolve) => setTimeout(resolve, 20));
  }

  // The only authorization: --forbid and --forbid-file refuse every verb on a
  // resource, as RBAC does for a user without a rule for it.
  authorize(request, type, namespace, name, watching) {
    const resource = resourceName(type);
    if (!this.options.forbidden.has(resource) && !this.forbiddenByFile().includes(resource)) return;
    const verbs = { GET: name ? 'get' : 'list', POST: 'create', PUT: 'update', PATCH: 'patch', DELETE: name ? 'delete' : 'deletecollection' };
    const verb = watching ? 'watch' : verbs[request.method] ?? request.method.toLowerCase();
    throw errors.forbidden(type, verb, namespace, this.authenticate(request));
  }

  // Newline-delimited JSON events. A resourceVersion no longer in the
  // history ends the stream with an ERROR event carrying 410 Expired, as the
  // real server's watch cache does, and so does one the server has not reached
  // (504 ResourceVersionTooLarge); other bad requests get an HTTP error.
  watch(request, response, type, namespace, query) {
    const write = (eventType, object) => {
      if (!response.headersSent) {
        response.writeHead(200, { 'Content-Type': 'application/json', 'Cache-Control': 'no-cache, private' });
      }
      response.write(`${JSON.stringify({ type: eventType, object })}\n`);
    };
    let unsubscribe;
    try {
      unsubscribe = this.api.watch(type, namespace, query, write);
    } catch (error) {
      if (!(error instanceof ApiError) || ![410, 504].includes(error.code)) throw error;
      const status = error.toStatus();
      if (this.options.watchErrorsWithoutCode) delete status.code;
      write('ERROR', status);
      response.end();
      return;
    }
    if (!response.headersSent) response.writeHead(200, { 'Content-Type': 'application/json', 'Cache-Control': 'no-cache, private' });
    // At once, as the real server does: a client knows its watch is accepted
    // before any event (it may go quiet for long without bookmarks).
    response.flushHeaders();
    const timers = [];
    const end = () => {
      timers.forEach(clearInterval);
      unsubscribe();
      this.watches.delete(end);
      if (!response.writableEnded) response.end();
    };
    this.watches.add(end);
    const seconds = Number(query.get('timeoutSeconds') ?? DEFAULT_WATCH_SECONDS);
    timers.push(setTimeout(end, Math.max(0, seconds) * 1000));
    if (query.get('allowWatchBookmarks') === 'true') {
      timers.push(setInterval(() => write('BOOKMARK', this.api.bookmark(type)), this.options.bookmarkIntervalMs));
    }
    request.on('close', end);
    response.on('close', end);
  }

  start() {
    const read = (file) => fs.readFileSync(path.join(this.options.pki, file));
    this.server = https.createServer({
      key: read('server.key'), cert: read('server.crt'), ca: read('ca.crt'), requestCert: true, rejectUnauthorized: false,
    }, (request, response) => this.handle(request, response));
    this.sockets = new Set();
    this.server.on('connection', (socket) => {
      socket.setNoDelay(true);
      this.sockets.add(socket);
      socket.on('close', () => this.sockets.delete(socket));
    });
    this.server.listen(this.options.port, '127.0.0.1', () => {
      this.port = this.server.address().port;
      writeAtomically(path.join(this.options.pki, 'kubeconfig'), kubeconfig(this.options, this.port));
      if (this.options.readyFile) writeAtomically(this.options.readyFile, `${this.port}\n`);
      console.log(`apiserver listening on https://127.0.0.1:${this.port}`);
    });
    for (const signal of ['SIGTERM', 'SIGINT']) process.on(signal, () => this.stop());
    if (this.options.ownerPid) this.watchOwner(this.options.ownerPid);
  }

  watchOwner(pid) {
    setInterval(() => {
      try {
        process.kill(pid, 0);
      } catch {
        console.log(`apiserver: owner ${pid} is gone`);
        this.stop();
      }
    }, 500).unref();
  }

  stop() {
    for (const end of [...this.watches]) end();
    this.server.close(() => process.exit(0));
    this.server.closeAllConnections();
    // Also those still in their TLS handshake, which closeAllConnections does
    // not know yet: a client reconnecting at once would keep the server up.
    for (const socket of this.sockets) socket.destroy();
    this.log?.end();
  }
}

function contentType(request) {
  return (request.headers['content-type'] ?? '').split(';')[0].trim().toLowerCase();
}

function requireJson(request) {
  const type = contentType(request);
  if (type && type !== 'application/json') throw errors.unsupportedMediaType(['application/json']);
}

async function readBody(request) {
  const chunks = [];
  let size = 0;
  for await (const chunk of request) {
    size += chunk.length;
    if (size > MAX_BODY_BYTES) throw new ApiError(413, 'RequestEntityTooLarge', 'Request entity too large: limit is 3145728');
    chunks.push(chunk);
  }
  if (!size) return undefined;
  try {
    return JSON.parse(Buffer.concat(chunks).toString('utf8'));
  } catch (error) {
    throw errors.badRequest(`json parse error: ${error.message}`);
  }
}

function send(response, code, body, headers = {}) {
  if (Buffer.isBuffer(body)) {
    response.writeHead(code, { 'Content-Type': OPENAPI_V2_PROTOBUF });
    response.end(body);
    return;
  }
  if (typeof body === 'string') {
    response.writeHead(code, { 'Content-Type': 'text/plain; charset=utf-8' });
    response.end(body);
    return;
  }
  response.writeHead(code, { ...headers, 'Content-Type': 'application/json', 'Cache-Control': 'no-cache, private' });
  response.end(`${JSON.stringify(body)}\n`);
}

new Server(parseOptions()).start();
