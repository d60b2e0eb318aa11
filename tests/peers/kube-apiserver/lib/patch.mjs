// The three patch formats of PATCH requests: JSON merge patch (RFC 7386), JSON
// patch (RFC 6902) and strategic merge patch. The strategic one needs Go
// struct tags the real server compiles in; here a table of list fields
// merged by key stands in for them (see README.md).
import { ApiError } from './status.mjs';

const isObject = (value) => value !== null && typeof value === 'object' && !Array.isArray(value);
export const clone = (value) => (value === undefined ? undefined : structuredClone(value));

export function mergePatch(target, patch) {
  if (!isObject(patch)) return clone(patch);
  const result = isObject(target) ? clone(target) : {};
  for (const [key, value] of Object.entries(patch)) {
    if (value === null) delete result[key];
    else result[key] = mergePatch(result[key], value);
  }
  return result;
}

// ---- JSON patch ----------------------------------------------------------

function patchError(message) {
  return new ApiError(422, 'Invalid', `the server rejected our request due to an error in our request: ${message}`);
}

function pointer(path) {
  if (path === '') return [];
  if (!path.startsWith('/')) throw patchError(`invalid JSON pointer "${path}"`);
  return path.slice(1).split('/').map((part) => part.replaceAll('~1', '/').replaceAll('~0', '~'));
}

function parentOf(document, parts, path) {
  let node = document;
  for (const part of parts.slice(0, -1)) {
    node = node?.[part];
    if (node === undefined || node === null || typeof node !== 'object') throw patchError(`path "${path}" does not exist`);
  }
  return node;
}

function arrayIndex(array, part, path, forInsert) {
  if (forInsert && part === '-') return array.length;
  const index = Number(part);
  const limit = forInsert ? array.length : array.length - 1;
  if (!/^\d+$/.test(part) || index > limit) throw patchError(`index out of range in "${path}"`);
  return index;
}

function getAt(document, path) {
  const parts = pointer(path);
  if (!parts.length) return document;
  const parent = parentOf(document, parts, path);
  const last = parts.at(-1);
  const value = Array.isArray(parent) ? parent[arrayIndex(parent, last, path, false)] : parent[last];
  if (value === undefined) throw patchError(`path "${path}" does not exist`);
  return value;
}

function removeAt(document, path) {
  const parts = pointer(path);
  const parent = parentOf(document, parts, path);
  const last = parts.at(-1);
  if (Array.isArray(parent)) return parent.splice(arrayIndex(parent, last, path, false), 1)[0];
  if (!(last in parent)) throw patchError(`path "${path}" does not exist`);
  const value = parent[last];
  delete parent[last];
  return value;
}

function addAt(document, path, value) {
  const parts = pointer(path);
  if (!parts.length) return value;
  const parent = parentOf(document, parts, path);
  const last = parts.at(-1);
  if (Array.isArray(parent)) parent.splice(arrayIndex(parent, last, path, true), 0, value);
  else parent[last] = value;
  return document;
}

export function jsonPatch(target, operations) {
  if (!Array.isArray(operations)) throw patchError('a JSON patch is an array of operations');
  let document = clone(target);
  for (const operation of operations) {
    const { op, path, from, value } = operation ?? {};
    switch (op) {
      case 'add': document = addAt(document, path, clone(value)); break;
      case 'remove': removeAt(document, path); break;
      case 'replace': getAt(document, path); removeAt(document, path); document = addAt(document, path, clone(value)); break;
      case 'move': document = addAt(document, path, removeAt(document, from)); break;
      case 'copy': document = addAt(document, path, clone(getAt(document, from))); break;
      case 'test':
        if (!deepEqual(getAt(document, path), value)) throw patchError(`testing value ${path} failed`);
        break;
      default: throw patchError(`unexpected kind of patch operation: "${op}"`);
    }
  }
  return document;
}

// ---- strategic merge patch -------------------------------------------------

// List fields merged by a key (patchStrategy "merge" with patchMergeKey), by
// field name, for the built-in types this server keeps. Other lists are replaced.
const MERGE_KEYS = {
  containers: 'name', initContainers: 'name', ephemeralContainers: 'name', volumes: 'name', env: 'name',
  ports: 'containerPort', volumeMounts: 'mountPath', volumeDevices: 'devicePath', imagePullSecrets: 'name',
  hostAliases: 'ip', ownerReferences: 'uid', conditions: 'type', addresses: 'type',
  topologySpreadConstraints: 'topologyKey', resourceClaims: 'name',
};
// Lists of scalars merged as sets (patchStrategy "merge" without a key).
const MERGED_SCALAR_LISTS = new Set(['finalizers']);

function mergeKeyedList(original, patch, key) {
  const result = clone(original ?? []);
  for (const item of patch) {
    const index = result.findIndex((existing) => isObject(existing) && isObject(item) && existing[key] === item[key]);
    if (isObject(item) && item.$patch === 'delete') {
      if (index >= 0) result.splice(index, 1);
    } else if (isObject(item) && item.$patch === 'replace') {
      const { $patch, ...rest } = item;
      if (index >= 0) result[index] = rest; else result.push(rest);
    } else if (index >= 0) {
      result[index] = strategicMergePatch(result[index], item);
    } else {
      result.push(strategicMergePatch({}, item));
    }
  }
  return result;
}

function ordered(list, order, key) {
  const position = (item) => {
    const found = order.findIndex((entry) => (key ? isObject(entry) && entry[key] === item?.[key] : entry === item));
    return found < 0 ? order.length : found;
  };
  return [...list].sort((a, b) => position(a) - position(b));
}

function mergeList(field, original, patch) {
  const key = MERGE_KEYS[field];
  if (key) return mergeKeyedList(original, patch, key);
  if (MERGED_SCALAR_LISTS.has(field)) return [...new Set([...(original ?? []), ...patch])];
  return clone(patch);
}

export function strategicMergePatch(target, patch) {
  if (!isObject(patch)) return clone(patch);
  if (patch.$patch === 'replace') {
    const { $patch, ...rest } = patch;
    return clone(rest);
  }
  if (patch.$patch === 'delete') return undefined;
  const result = isObject(target) ? clone(target) : {};
  for (const [key, value] of Object.entries(patch)) {
    if (key.startsWith('$')) continue;
    if (value === null) delete result[key];
    else if (Array.isArray(value)) result[key] = mergeList(key, result[key], value);
    else if (isObject(value)) {
      const merged = strategicMergePatch(result[key], value);
      if (merged === undefined) delete result[key]; else result[key] = merged;
    } else result[key] = value;
  }
  for (const [directive, value] of Object.entries(patch)) {
    const [name, field] = directive.split('/');
    if (name === '$deleteFromPrimitiveList' && Array.isArray(result[field])) {
      result[field] = result[field].filter((item) => !value.includes(item));
    } else if (name === '$setElementOrder' && Array.isArray(result[field])) {
      result[field] = ordered(result[field], value, MERGE_KEYS[field]);
    } else if (name === '$retainKeys' && Array.isArray(value)) {
      for (const key of Object.keys(result)) if (!value.includes(key)) delete result[key];
    }
  }
  return result;
}

export function deepEqual(a, b) {
  if (a === b) return true;
  if (typeof a !== typeof b || a === null || b === null || typeof a !== 'object') return false;
  if (Array.isArray(a) !== Array.isArray(b)) return false;
  const keysA = Object.keys(a);
  const keysB = Object.keys(b);
  if (keysA.length !== keysB.length) return false;
  return keysA.every((key) => Object.prototype.hasOwnProperty.call(b, key) && deepEqual(a[key], b[key]));
}
