// The verbs on resources: get, list, watch, create, update, patch, delete and
// deletecollection, with the real server's preconditions, defaults and
// errors, plus garbage collection of dependents (see README.md).
import crypto from 'node:crypto';
import { apiVersionOf } from './registry.mjs';
import { clone, deepEqual, jsonPatch, mergePatch, strategicMergePatch } from './patch.mjs';
import { applyDefaults, prune, validate } from './schema.mjs';
import { fieldSelector, labelSelector } from './selectors.mjs';
import { errors, successStatus } from './status.mjs';

const DNS_SUBDOMAIN = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/;
const DNS_LABEL = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/;
const GENERATE_CHARS = 'bcdfghjklmnpqrstvwxz2456789';
const now = () => new Date().toISOString().replace(/\.\d+Z$/, 'Z');

// The object as a client of this type and version sees it.
export function present(type, object) {
  return { ...object, apiVersion: apiVersionOf(type), kind: type.kind };
}

function nameProblem(type, name) {
  if (type.group === 'rbac.authorization.k8s.io') {
    return name === '.' || name === '..' || /[/%]/.test(name) ? 'may not contain \'/\' or \'%\' and may not be \'.\' or \'..\'' : '';
  }
  if (type.plural === 'namespaces') {
    return name.length <= 63 && DNS_LABEL.test(name) ? '' :
      `a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')`;
  }
  return name.length <= 253 && DNS_SUBDOMAIN.test(name) ? '' :
    `a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')`;
}

// Everything but metadata and status: a change there bumps metadata.generation.
const specOf = (object) => {
  const { metadata, status, ...rest } = object;
  return rest;
};

export class Api {
  constructor({ store, registry }) {
    this.store = store;
    this.registry = registry;
    for (const name of ['default', 'kube-system', 'kube-public', 'kube-node-lease']) {
      this.create(this.registry.find('', 'v1', 'namespaces'), '', { metadata: { name } });
    }
  }

  // ---- reads --------------------------------------------------------------

  get(type, namespace, name) {
    const object = this.store.get(type, namespace, name);
    if (!object) throw errors.notFound(type, name);
    return present(type, object);
  }

  matcher(query) {
    const labels = labelSelector(query.get('labelSelector'));
    const fields = fieldSelector(query.get('fieldSelector'));
    return (object) => labels(object) && fields(object);
  }

  // limit and continue are ignored: the whole list comes in one page, which
  // the API allows a server to do.
  list(type, namespace, query) {
    const matches = this.matcher(query);
    const items = this.store.list(type, namespace).filter(matches)
      .map((object) => (type.builtin ? withoutTypeMeta(object) : present(type, object)));
    return {
      kind: type.listKind ?? `${type.kind}List`, apiVersion: apiVersionOf(type),
      metadata: { resourceVersion: this.store.resourceVersion }, items,
    };
  }

  // send(eventType, object) writes one event; returns the unsubscribe function.
  watch(type, namespace, query, send) {
    const matches = this.matcher(query);
    const watcher = { type, namespace, matches, send: (eventType, object) => send(eventType, present(type, object)) };
    const initialEvents = query.get('sendInitialEvents') === 'true';
    const from = initialEvents ? '0' : query.get('resourceVersion') ?? undefined;
    const unsubscribe = this.store.watch(watcher, from);
    if (initialEvents) send('BOOKMARK', this.bookmark(type, { 'k8s.io/initial-events-end': 'true' }));
    return unsubscribe;
  }

  bookmark(type, annotations) {
    const metadata = { resourceVersion: this.store.resourceVersion, creationTimestamp: null };
    if (annotations) metadata.annotations = annotations;
    return { kind: type.kind, apiVersion: apiVersionOf(type), metadata };
  }

  // ---- create -------------------------------------------------------------

  create(type, namespace, body, options = {}) {
    const object = this.checkedBody(type, namespace, body);
    const metadata = object.metadata;
    if (!metadata.name && metadata.generateName) metadata.name = metadata.generateName + randomSuffix();
    if (!metadata.name) {
      throw errors.invalid(type, '', [{ reason: 'FieldValueRequired', message: 'Required value: name or generateName is required', field: 'metadata.name' }]);
    }
    const problem = nameProblem(type, metadata.name);
    if (problem) throw errors.invalid(type, metadata.name, [{ reason: 'FieldValueInvalid', message: `Invalid value: "${metadata.name}": ${problem}`, field: 'metadata.name' }]);
    if (metadata.resourceVersion) throw errors.internal('resourceVersion should not be set on objects to be created');
    if (type.namespaced && !this.store.get(this.registry.find('', 'v1', 'namespaces'), '', namespace)) {
      throw errors.namespaceNotFound(namespace);
    }
    if (this.store.get(type, namespace, metadata.name)) throw errors.alreadyExists(type, metadata.name);
    metadata.uid = crypto.randomUUID();
    metadata.creationTimestamp = now();
    delete metadata.deletionTimestamp;
    delete metadata.deletionGracePeriodSeconds;
    if (type.generation) metadata.generation = 1;
    // A status subresource means clients cannot set status on create
    // (nodes excepted: the kubelet registers them with their status).
    if (type.status && type.plural !== 'nodes') delete object.status;
    this.admit(type, object, options);
    if (options.dryRun) return present(type, object);
    const stored = this.store.put(type, object);
    if (type.plural === 'customresourcedefinitions') this.crdsChanged();
    return present(type, stored);
  }

  // The body's apiVersion, kind and namespace must fit the URL.
  checkedBody(type, namespace, body) {
    if (body === null || typeof body !== 'object' || Array.isArray(body)) throw errors.badRequest('the body of the request must be a JSON object');
    const object = clone(body);
    if (object.apiVersion && object.apiVersion !== apiVersionOf(type)) {
      throw errors.badRequest(`the API version in the data (${object.apiVersion}) does not match the expected API version (${apiVersionOf(type)})`);
    }
    if (object.kind && object.kind !== type.kind) {
      throw errors.badRequest(`the kind in the data (${object.kind}) does not match the expected kind (${type.kind})`);
    }
    object.apiVersion = apiVersionOf(type);
    object.kind = type.kind;
    object.metadata = object.metadata ?? {};
    if (type.namespaced) {
      if (object.metadata.namespace && object.metadata.namespace !== namespace) {
        throw errors.badRequest('the namespace of the provided object does not match the namespace sent on the request');
      }
      object.metadata.namespace = namespace;
    } else {
      delete object.metadata.namespace;
    }
    return object;
  }

  // Per-type defaults and validation, on create and on every update.
  // options.fieldValidation: Strict, Warn (default) or Ignore, for fields a
  // custom resource's schema does not declare; warnings go to options.warnings.
  admit(type, object, options) {
    if (type.plural === 'secrets') admitSecret(object);
    if (type.plural === 'namespaces') admitNamespace(object);
    if (type.plural === 'customresourcedefinitions') admitCrd(type, object);
    if (!type.builtin && type.schema) {
      const unknown = admitCustomResource(type, object).map((field) => `unknown field "${field}"`);
      if (unknown.length && options.fieldValidation === 'Strict') {
        throw errors.badRequest(`${type.kind} in version "${type.version}" cannot be handled as a ${type.kind}: strict decoding error: ${unknown.join(', ')}`);
      }
      if (options.fieldValidation !== 'Ignore') options.warnings?.push(...unknown);
    }
  }

  // ---- update and patch ------------------------------------------------------

  // PUT. The custom-resource rule that resourceVersion must be given applies
  // to PUT only; a patch without one is unconditional.
  update(type, namespace, name, body, options = {}) {
    const { subresource, dryRun = false, fromPatch = false } = options;
    const current = this.store.get(type, namespace, name);
    if (!current) throw errors.notFound(type, name);
    const object = this.checkedBody(type, namespace, body);
    if (object.metadata.name !== name) {
      throw errors.badRequest(`the name of the object (${object.metadata.name}) does not match the name on the URL (${name})`);
    }
    const wanted = object.metadata.resourceVersion;
    if (wanted && wanted !== current.metadata.resourceVersion) throw errors.conflict(type, name);
    if (!wanted && !type.builtin && !fromPatch) {
      throw errors.invalid(type, name, [{ reason: 'FieldValueInvalid', message: 'Invalid value: 0x0: must be specified for an update', field: 'metadata.resourceVersion' }]);
    }
    if (object.metadata.uid && object.metadata.uid !== current.metadata.uid) {
      throw errors.conflict(type, name, `Precondition failed: UID in precondition: ${object.metadata.uid}, UID in object meta: ${current.metadata.uid}`);
    }
    const next = subresource === 'status' ? withStatusOf(current, object) : withStatusOf(object, type.status ? current : object);
    for (const field of ['uid', 'creationTimestamp', 'deletionTimestamp', 'deletionGracePeriodSeconds', 'generation']) {
      if (current.metadata[field] === undefined) delete next.metadata[field];
      else next.metadata[field] = current.metadata[field];
    }
    this.admit(type, next, options);
    next.metadata.resourceVersion = current.metadata.resourceVersion;
    if (type.generation && !deepEqual(specOf(next), specOf(current))) next.metadata.generation = (current.metadata.generation ?? 0) + 1;
    if (dryRun) return present(type, next);
    if (next.metadata.deletionTimestamp && !next.metadata.finalizers?.length) return present(type, this.removeNow(type, next));
    if (deepEqual(next, current)) return present(type, current);  // a no-op keeps its resourceVersion
    const stored = this.store.put(type, next, current);
    if (type.plural === 'customresourcedefinitions') this.crdsChanged();
    return present(type, stored);
  }

  patch(type, namespace, name, contentType, patch, options = {}) {
    const current = this.store.get(type, namespace, name);
    if (!current) throw errors.notFound(type, name);
    const accepted = ['application/json-patch+json', 'application/merge-patch+json'];
    if (type.builtin) accepted.push('application/strategic-merge-patch+json');
    if (!accepted.includes(contentType)) throw errors.unsupportedMediaType(accepted);
    const base = present(type, current);
    let patched;
    if (contentType === 'application/json-patch+json') patched = jsonPatch(base, patch);
    else if (contentType === 'application/merge-patch+json') patched = mergePatch(base, patch);
    else patched = strategicMergePatch(base, patch);
    return this.update(type, namespace, name, patched, { ...options, fromPatch: true });
  }

  // ---- delete -------------------------------------------------------------

  delete(type, namespace, name, options = {}, { dryRun = false } = {}) {
    const current = this.store.get(type, namespace, name);
    if (!current) throw errors.notFound(type, name);
    const preconditions = options.preconditions ?? {};
    if (preconditions.uid && preconditions.uid !== current.metadata.uid) {
      throw errors.conflict(type, name, `Precondition failed: UID in precondition: ${preconditions.uid}, UID in object meta: ${current.metadata.uid}`);
    }
    if (preconditions.resourceVersion && preconditions.resourceVersion !== current.metadata.resourceVersion) {
      throw errors.conflict(type, name,
        `Precondition failed: ResourceVersion in precondition: ${preconditions.resourceVersion}, ResourceVersion in object meta: ${current.metadata.resourceVersion}`);
    }
    const details = { name, ...(type.group ? { group: type.group } : {}), kind: type.plural, uid: current.metadata.uid };
    if (dryRun) return successStatus(details);
    if (current.metadata.finalizers?.length) {
      // Finalizers keep the object, marked for deletion, until they are removed.
      if (current.metadata.deletionTimestamp) return present(type, current);
      const marked = clone(current);
      marked.metadata.deletionTimestamp = now();
      marked.metadata.deletionGracePeriodSeconds = 0;
      return present(type, this.store.put(type, marked, current));
    }
    this.removeNow(type, current, options.propagationPolicy);
    return successStatus(details);
  }

  deleteCollection(type, namespace, query, options) {
    const matches = this.matcher(query);
    const items = this.store.list(type, namespace).filter(matches)
      .map((object) => this.delete(type, object.metadata.namespace ?? '', object.metadata.name, options));
    return { kind: `${type.kind}List`, apiVersion: apiVersionOf(type), metadata: { resourceVersion: this.store.resourceVersion }, items };
  }

  // Removes the object, then what it contained (namespaces, CRDs) and its
  // dependents (garbage collection, synchronous here).
  removeNow(type, object, propagationPolicy = 'Background') {
    if (type.plural === 'namespaces') this.removeNamespaceContents(object.metadata.name);
    if (type.plural === 'customresourcedefinitions') this.removeCustomResources(object);
    const removed = this.store.remove(type, object);
    if (type.plural === 'customresourcedefinitions') this.crdsChanged();
    this.collectDependents(object.metadata.uid, propagationPolicy);
    return removed;
  }

  removeNamespaceContents(namespace) {
    for (const { type, object } of this.store.entries()) {
      const current = object.metadata.namespace === namespace && this.store.get(type, namespace, object.metadata.name);
      if (current) this.removeNow(type, current);
    }
  }

  removeCustomResources(crd) {
    const type = { group: crd.spec.group, plural: crd.spec.names.plural, builtin: false };
    for (const object of this.store.list(type)) this.removeNow(type, object);
  }

  // Dependents whose every owner is gone are deleted; references to a gone
  // owner are dropped from dependents that have another owner, or that the
  // deletion orphans.
  collectDependents(ownerUid, propagationPolicy) {
    const dependents = this.store.entries()
      .filter(({ object }) => object.metadata.ownerReferences?.some((reference) => reference.uid === ownerUid));
    for (const { type, object: dependent } of dependents) {
      const current = this.store.get(type, dependent.metadata.namespace, dependent.metadata.name);
      if (!current) continue;
      const others = current.metadata.ownerReferences.filter((reference) => reference.uid !== ownerUid);
      if (propagationPolicy === 'Orphan' || others.some((reference) => this.store.findByUid(reference.uid))) {
        const kept = clone(current);
        kept.metadata.ownerReferences = others;
        if (!others.length) delete kept.metadata.ownerReferences;
        this.store.put(type, kept, current);
      } else if (current.metadata.finalizers?.length) {
        this.delete(type, current.metadata.namespace ?? '', current.metadata.name);
      } else {
        this.removeNow(type, current);
      }
    }
  }

  crdsChanged() {
    const crdType = this.registry.find('apiextensions.k8s.io', 'v1', 'customresourcedefinitions');
    this.registry.setCrds(this.store.list(crdType));
  }
}

function randomSuffix() {
  return Array.from(crypto.randomBytes(5), (byte) => GENERATE_CHARS[byte % GENERATE_CHARS.length]).join('');
}

function withoutTypeMeta(object) {
  const { apiVersion, kind, ...rest } = object;
  return rest;
}

// from's fields with status's status.
function withStatusOf(from, status) {
  const result = clone(from);
  if (status.status === undefined) delete result.status;
  else result.status = clone(status.status);
  return result;
}

function admitSecret(secret) {
  secret.type = secret.type ?? 'Opaque';
  if (secret.stringData) {
    secret.data = secret.data ?? {};
    for (const [key, value] of Object.entries(secret.stringData)) secret.data[key] = Buffer.from(String(value)).toString('base64');
    delete secret.stringData;
  }
  for (const [key, value] of Object.entries(secret.data ?? {})) {
    if (typeof value !== 'string' || Buffer.from(value, 'base64').toString('base64') !== value) {
      throw errors.badRequest(`Secret in version "v1" cannot be handled as a Secret: illegal base64 data at data[${JSON.stringify(key)}]`);
    }
  }
}

function admitNamespace(namespace) {
  namespace.metadata.labels = { ...namespace.metadata.labels, 'kubernetes.io/metadata.name': namespace.metadata.name };
  namespace.spec = { finalizers: ['kubernetes'], ...namespace.spec };
  namespace.status = { phase: 'Active', ...namespace.status };
}

function admitCrd(type, crd) {
  const { group, names = {}, versions = [] } = crd.spec ?? {};
  const causes = [];
  if (crd.metadata.name !== `${names.plural}.${group}`) {
    causes.push({ reason: 'FieldValueInvalid', message: `Invalid value: "${crd.metadata.name}": must be spec.names.plural+"."+spec.group`, field: 'metadata.name' });
  }
  if (!names.kind) causes.push({ reason: 'FieldValueRequired', message: 'Required value', field: 'spec.names.kind' });
  if (!['Namespaced', 'Cluster'].includes(crd.spec?.scope)) {
    causes.push({ reason: 'FieldValueNotSupported', message: `Unsupported value: "${crd.spec?.scope}": supported values: "Cluster", "Namespaced"`, field: 'spec.scope' });
  }
  if (versions.filter((version) => version.storage).length !== 1) {
    causes.push({ reason: 'FieldValueInvalid', message: 'Invalid value: must have exactly one version marked as storage version', field: 'spec.versions' });
  }
  versions.forEach((version, index) => {
    if (!version.schema?.openAPIV3Schema) causes.push({ reason: 'FieldValueRequired', message: 'Required value: schemas are required', field: `spec.versions[${index}].schema.openAPIV3Schema` });
  });
  if (causes.length) throw errors.invalid(type, crd.metadata.name, causes);
  crd.spec.conversion = crd.spec.conversion ?? { strategy: 'None' };
  const acceptedNames = { ...names, singular: names.singular ?? names.kind.toLowerCase(), listKind: names.listKind ?? `${names.kind}List` };
  crd.spec.names = { ...acceptedNames };
  const since = (conditionType) => crd.status?.conditions?.find((existing) => existing.type === conditionType)?.lastTransitionTime ?? now();
  const condition = (conditionType, reason, message) => ({ type: conditionType, status: 'True', lastTransitionTime: since(conditionType), reason, message });
  crd.status = {
    conditions: [
      condition('NamesAccepted', 'NoConflicts', 'no conflicts found'),
      condition('Established', 'InitialNamesAccepted', 'the initial names have been accepted'),
    ],
    acceptedNames,
    storedVersions: versions.filter((version) => version.storage).map((version) => version.name),
  };
}

// Defaults, pruning of undeclared fields and validation against the CRD schema.
// Returns the paths of the fields removed because the schema does not declare them.
function admitCustomResource(type, object) {
  const causes = [];
  const removed = [];
  for (const key of Object.keys(object)) {
    if (['apiVersion', 'kind', 'metadata'].includes(key)) continue;
    const schema = type.schema.properties?.[key];
    if (!schema && !type.schema['x-kubernetes-preserve-unknown-fields']) {
      removed.push(key);
      delete object[key];
      continue;
    }
    applyDefaults(object[key], schema);
    prune(object[key], schema, key, removed);
    validate(object[key], schema, key, causes);
  }
  for (const [key, schema] of Object.entries(type.schema.properties ?? {})) {
    if (object[key] === undefined && schema.default !== undefined) object[key] = clone(schema.default);
  }
  for (const key of type.schema.required ?? []) {
    if (object[key] === undefined) causes.push({ reason: 'FieldValueRequired', message: 'Required value', field: key });
  }
  if (causes.length) throw errors.invalid(type, object.metadata.name, causes);
  return removed;
}
