// The object table: one map keyed by group/resource/namespace/name (each
// entry the object and the type it was written through), one
// global resourceVersion counter, the event history that watches replay
// from, and the live watchers.
import { storageKey } from './registry.mjs';
import { errors } from './status.mjs';

const objectKey = (storage, namespace, name) => `${storage}/${namespace ?? ''}/${name}`;

export class Store {
  constructor({ historyLimit }) {
    this.objects = new Map();
    this.revision = 0;
    this.history = [];
    this.historyLimit = historyLimit;
    this.compactedRevision = 0;  // events up to this one are no longer kept
    this.watchers = new Set();
  }

  get resourceVersion() {
    return String(this.revision);
  }

  get(type, namespace, name) {
    return this.objects.get(objectKey(storageKey(type), namespace, name))?.object;
  }

  // Objects of one storage, optionally one namespace, sorted by namespace and name.
  list(type, namespace = '') {
    const prefix = `${storageKey(type)}/${namespace ? namespace + '/' : ''}`;
    return [...this.objects.entries()]
      .filter(([key]) => key.startsWith(prefix))
      .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))
      .map(([, entry]) => entry.object);
  }

  // [{type, object}] of every stored object.
  entries() {
    return [...this.objects.values()];
  }

  findByUid(uid) {
    return this.entries().find((entry) => entry.object.metadata.uid === uid)?.object;
  }

  // Stores a new state of an object (never mutated afterwards) under a new
  // resourceVersion and tells the watchers. previous: the state it replaces.
  put(type, object, previous) {
    this.revision++;
    object.metadata.resourceVersion = String(this.revision);
    this.objects.set(objectKey(storageKey(type), object.metadata.namespace, object.metadata.name), { type, object });
    this.record({ storage: storageKey(type), type: previous ? 'MODIFIED' : 'ADDED', object, previous });
    return object;
  }

  remove(type, object) {
    this.revision++;
    const removed = structuredClone(object);
    removed.metadata.resourceVersion = String(this.revision);
    this.objects.delete(objectKey(storageKey(type), object.metadata.namespace, object.metadata.name));
    this.record({ storage: storageKey(type), type: 'DELETED', object: removed, previous: object });
    return removed;
  }

  record(event) {
    event.revision = this.revision;
    this.history.push(event);
    while (this.history.length > this.historyLimit) this.compactedRevision = this.history.shift().revision;
    for (const watcher of this.watchers) deliver(watcher, event);
  }

  // Starts a watch. from: undefined/"0" replays the current state as ADDED
  // events; a number replays the kept events after it, or throws Expired
  // when they are no longer kept, or TooLargeResourceVersion when not reached yet.
  watch(watcher, from) {
    if (from === undefined || from === '' || from === '0') {
      for (const object of this.list(watcher.type, watcher.namespace)) {
        if (watcher.matches(object)) watcher.send('ADDED', object);
      }
    } else {
      const revision = Number(from);
      if (!/^\d+$/.test(from)) throw errors.badRequest(`invalid resource version: ${from}`);
      if (revision < this.compactedRevision) {
        throw errors.expired(`too old resource version: ${revision} (${this.compactedRevision + 1})`);
      }
      // The real watch cache first waits up to 3 s for the version to come.
      if (revision > this.revision) throw errors.tooLargeResourceVersion(revision, this.revision);
      for (const event of this.history) if (event.revision > revision) deliver(watcher, event);
    }
    this.watchers.add(watcher);
    return () => this.watchers.delete(watcher);
  }
}

// An object moving into or out of a watch's selector is ADDED or DELETED for
// that watch, as with the real server's watch cache.
function deliver(watcher, event) {
  if (event.storage !== storageKey(watcher.type)) return;
  const namespace = event.object.metadata.namespace ?? '';
  if (watcher.namespace && namespace !== watcher.namespace) return;
  const now = event.type !== 'DELETED' && watcher.matches(event.object);
  const before = event.type === 'MODIFIED' && watcher.matches(event.previous);
  if (event.type === 'DELETED') {
    if (watcher.matches(event.object)) watcher.send('DELETED', event.object);
  } else if (now) {
    watcher.send(before ? 'MODIFIED' : 'ADDED', event.object);
  } else if (before) {
    const left = structuredClone(event.previous);
    left.metadata.resourceVersion = event.object.metadata.resourceVersion;
    watcher.send('DELETED', left);
  }
}
