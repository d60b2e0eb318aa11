// kube.peer.rest: the REST semantics the C++ client relies on, checked over
// HTTPS against the test API server (kubectl_test.sh checks it with kubectl).
// Usage: node rest_test.mjs   (starts its own server with start-apiserver.sh)
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import https from 'node:https';
import os from 'node:os';
import path from 'node:path';
import assert from 'node:assert/strict';
import { fileURLToPath } from 'node:url';

const here = path.dirname(fileURLToPath(import.meta.url));
const work = fs.mkdtempSync(path.join(process.env.TMPDIR ?? os.tmpdir(), 'kube-peer-rest.'));
const pki = path.join(work, 'pki');
execFileSync(path.join(here, 'start-apiserver.sh'), [pki, '--owner-pid', String(process.pid), '--bookmark-interval-ms', '200'], { stdio: ['ignore', 'ignore', 'inherit'] });
const port = Number(fs.readFileSync(path.join(pki, 'ready'), 'utf8'));
const ca = fs.readFileSync(path.join(pki, 'ca.crt'));
const token = () => fs.readFileSync(path.join(pki, 'token'), 'utf8').trim();

function request(method, urlPath, body, { contentType = 'application/json', bearer = token() } = {}) {
  return new Promise((resolve, reject) => {
    const payload = body === undefined ? undefined : JSON.stringify(body);
    const headers = { Authorization: `Bearer ${bearer}`, Accept: 'application/json' };
    if (payload) Object.assign(headers, { 'Content-Type': contentType, 'Content-Length': Buffer.byteLength(payload) });
    const call = https.request({ host: '127.0.0.1', port, method, path: urlPath, ca, headers }, (response) => {
      let text = '';
      response.on('data', (chunk) => { text += chunk; });
      response.on('end', () => resolve({ status: response.statusCode, body: text ? JSON.parse(text) : undefined }));
    });
    call.on('error', reject);
    call.end(payload);
  });
}

// Collects the events of one watch until `until(events)` holds (or 20 s pass).
function watch(urlPath, until) {
  return new Promise((resolve, reject) => {
    const events = [];
    const call = https.get({ host: '127.0.0.1', port, path: urlPath, ca, headers: { Authorization: `Bearer ${token()}` } }, (response) => {
      let buffer = '';
      response.on('data', (chunk) => {
        buffer += chunk;
        for (let newline; (newline = buffer.indexOf('\n')) >= 0; buffer = buffer.slice(newline + 1)) {
          events.push(JSON.parse(buffer.slice(0, newline)));
        }
        if (until(events)) {
          call.destroy();
          resolve(events);
        }
      });
      response.on('end', () => resolve(events));
    });
    call.on('error', (error) => (error.code === 'ECONNRESET' ? resolve(events) : reject(error)));
    call.setTimeout(20000, () => reject(new Error(`watch ${urlPath}: nothing after 20 s; got ${JSON.stringify(events)}`)));
  });
}

const configurations = '/apis/akri.sh/v0/namespaces/default/configurations';
const instances = '/apis/akri.sh/v0/namespaces/default/instances';
const configuration = (name, capacity = 1) => ({
  apiVersion: 'akri.sh/v0', kind: 'Configuration', metadata: { name }, spec: { capacity, discoveryHandler: { name: 'debugEcho' } },
});
const instance = (name, owner, labels = {}) => ({
  apiVersion: 'akri.sh/v0', kind: 'Instance',
  metadata: { name, labels, ...(owner ? { ownerReferences: [{ apiVersion: 'akri.sh/v0', kind: 'Configuration', name: owner.metadata.name, uid: owner.metadata.uid, controller: true, blockOwnerDeletion: true }] } : {}) },
  spec: { configurationName: 'c', cdiName: `akri.sh/c=${name}`, capacity: 2 },
});

const checks = [];
const check = (name, run) => checks.push({ name, run });

check('401 Unauthorized is a Status', async () => {
  const answer = await request('GET', '/api/v1/namespaces', undefined, { bearer: 'wrong' });
  assert.equal(answer.status, 401);
  assert.deepEqual([answer.body.kind, answer.body.reason, answer.body.code], ['Status', 'Unauthorized', 401]);
});

check('create, get, update with resourceVersion preconditions', async () => {
  const created = await request('POST', configurations, configuration('cas'));
  assert.equal(created.status, 201);
  const { metadata } = created.body;
  assert.match(metadata.resourceVersion, /^\d+$/);
  assert.ok(metadata.uid && metadata.creationTimestamp);
  assert.equal(metadata.generation, 1);
  const again = await request('POST', configurations, configuration('cas'));
  assert.deepEqual([again.status, again.body.reason], [409, 'AlreadyExists']);

  const changed = { ...created.body, spec: { ...created.body.spec, capacity: 3 } };
  const noVersion = structuredClone(changed);
  delete noVersion.metadata.resourceVersion;
  const refused = await request('PUT', `${configurations}/cas`, noVersion);
  assert.deepEqual([refused.status, refused.body.reason], [422, 'Invalid']);
  const updated = await request('PUT', `${configurations}/cas`, changed);
  assert.equal(updated.status, 200);
  assert.ok(Number(updated.body.metadata.resourceVersion) > Number(metadata.resourceVersion));
  assert.equal(updated.body.metadata.generation, 2);
  const stale = await request('PUT', `${configurations}/cas`, changed);
  assert.deepEqual([stale.status, stale.body.reason, stale.body.details.group, stale.body.details.kind], [409, 'Conflict', 'akri.sh', 'configurations']);
  const same = await request('PUT', `${configurations}/cas`, updated.body);
  assert.equal(same.body.metadata.resourceVersion, updated.body.metadata.resourceVersion, 'a no-op update keeps the resourceVersion');
});

check('delete: preconditions, 404', async () => {
  const created = (await request('POST', configurations, configuration('doomed'))).body;
  const stale = await request('DELETE', `${configurations}/doomed`, { preconditions: { resourceVersion: '1' } });
  assert.deepEqual([stale.status, stale.body.reason], [409, 'Conflict']);
  const deleted = await request('DELETE', `${configurations}/doomed`, { preconditions: { resourceVersion: created.metadata.resourceVersion } });
  assert.equal(deleted.status, 200);
  const absent = await request('DELETE', `${configurations}/doomed`);
  assert.deepEqual([absent.status, absent.body.reason, absent.body.message], [404, 'NotFound', 'configurations.akri.sh "doomed" not found']);
});

check('watch replays from a resourceVersion, follows label selectors', async () => {
  const start = (await request('GET', instances)).body.metadata.resourceVersion;
  await request('POST', instances, instance('w1', undefined, { pick: 'yes' }));
  const current = (await request('GET', `${instances}/w1`)).body;
  current.metadata.labels.pick = 'no';
  await request('PUT', `${instances}/w1`, current);
  await request('DELETE', `${instances}/w1`);
  const all = await watch(`${instances}?watch=1&resourceVersion=${start}`, (events) => events.length >= 3);
  assert.deepEqual(all.map((event) => event.type), ['ADDED', 'MODIFIED', 'DELETED']);
  const selected = await watch(`/apis/akri.sh/v0/watch/namespaces/default/instances?labelSelector=pick%3Dyes&resourceVersion=${start}`, (events) => events.length >= 2);
  assert.deepEqual(selected.map((event) => event.type), ['ADDED', 'DELETED'], 'leaving the selector is a DELETED event');
  const withBookmarks = await watch(`${instances}?watch=true&allowWatchBookmarks=true&resourceVersion=${start}`, (events) => events.some((event) => event.type === 'BOOKMARK'));
  assert.equal(withBookmarks.at(-1).object.kind, 'Instance');
});

check('nodes: the status subresource', async () => {
  const node = { apiVersion: 'v1', kind: 'Node', metadata: { name: 'n1' }, spec: {}, status: { conditions: [{ type: 'Ready', status: 'True' }] } };
  const created = (await request('POST', '/api/v1/nodes', node)).body;
  const viaStatus = { ...created, spec: { unschedulable: true }, status: { conditions: [{ type: 'Ready', status: 'False' }] } };
  const afterStatus = (await request('PUT', '/api/v1/nodes/n1/status', viaStatus)).body;
  assert.deepEqual([afterStatus.status.conditions[0].status, afterStatus.spec.unschedulable], ['False', undefined]);
  const viaMain = { ...afterStatus, spec: { unschedulable: true }, status: { conditions: [] } };
  const afterMain = (await request('PUT', '/api/v1/nodes/n1', viaMain)).body;
  assert.deepEqual([afterMain.status.conditions[0].status, afterMain.spec.unschedulable], ['False', true]);
});

check('patch types', async () => {
  await request('POST', configurations, configuration('patched'));
  const json = await request('PATCH', `${configurations}/patched`, [{ op: 'replace', path: '/spec/capacity', value: 5 }], { contentType: 'application/json-patch+json' });
  assert.equal(json.body.spec.capacity, 5);
  const merge = await request('PATCH', `${configurations}/patched`, { spec: { brokerProperties: { A: 'b' } } }, { contentType: 'application/merge-patch+json' });
  assert.deepEqual([merge.body.spec.capacity, merge.body.spec.brokerProperties], [5, { A: 'b' }]);
  const strategic = await request('PATCH', `${configurations}/patched`, {}, { contentType: 'application/strategic-merge-patch+json' });
  assert.deepEqual([strategic.status, strategic.body.reason], [415, 'UnsupportedMediaType']);
  const apply = await request('PATCH', `${configurations}/patched`, {}, { contentType: 'application/apply-patch+yaml' });
  assert.equal(apply.status, 415);
});

check('generateName, missing namespace', async () => {
  const generated = await request('POST', configurations, { ...configuration(undefined), metadata: { generateName: 'gen-' } });
  assert.match(generated.body.metadata.name, /^gen-[a-z0-9]{5}$/);
  const orphan = await request('POST', '/apis/akri.sh/v0/namespaces/nowhere/configurations', configuration('x'));
  assert.deepEqual([orphan.status, orphan.body.message], [404, 'namespaces "nowhere" not found']);
});

check('finalizers hold a deletion until removed', async () => {
  const created = (await request('POST', configurations, { ...configuration('held'), metadata: { name: 'held', finalizers: ['example.com/hold'] } })).body;
  const marked = await request('DELETE', `${configurations}/held`);
  assert.ok(marked.body.metadata.deletionTimestamp);
  const current = (await request('GET', `${configurations}/held`)).body;
  assert.notEqual(current.metadata.resourceVersion, created.metadata.resourceVersion);
  current.metadata.finalizers = [];
  assert.equal((await request('PUT', `${configurations}/held`, current)).status, 200);
  assert.equal((await request('GET', `${configurations}/held`)).status, 404);
});

check('garbage collection: background, orphan, namespaces', async () => {
  const owner = (await request('POST', configurations, configuration('owner'))).body;
  await request('POST', instances, instance('owned', owner));
  await request('DELETE', `${configurations}/owner`);
  assert.equal((await request('GET', `${instances}/owned`)).status, 404);

  const keeper = (await request('POST', configurations, configuration('keeper'))).body;
  await request('POST', instances, instance('kept', keeper));
  await request('DELETE', `${configurations}/keeper`, { propagationPolicy: 'Orphan' });
  const kept = await request('GET', `${instances}/kept`);
  assert.deepEqual([kept.status, kept.body.metadata.ownerReferences], [200, undefined]);

  await request('POST', '/api/v1/namespaces', { metadata: { name: 'scratch' } });
  await request('POST', '/apis/akri.sh/v0/namespaces/scratch/configurations', configuration('inside'));
  await request('DELETE', '/api/v1/namespaces/scratch');
  assert.equal((await request('GET', '/apis/akri.sh/v0/namespaces/scratch/configurations/inside')).status, 404);
});

let failed = 0;
try {
  for (const { name, run } of checks) {
    try {
      await run();
      console.log(`ok - ${name}`);
    } catch (error) {
      failed++;
      console.log(`FAIL - ${name}\n${error.stack}`);
    }
  }
} finally {
  process.kill(Number(fs.readFileSync(path.join(pki, 'apiserver.pid'), 'utf8')), 'SIGTERM');
  if (failed) console.log(fs.readFileSync(path.join(pki, 'apiserver.out'), 'utf8'));
  fs.rmSync(work, { recursive: true, force: true });
}
process.exit(failed ? 1 : 0);
