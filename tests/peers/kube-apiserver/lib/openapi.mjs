// /openapi/v2: an empty document (no definitions), in protobuf as kubectl
// asks for it; kubectl before 1.27 needs it to exist and then validates
// nothing on the client side. /openapi/v3: the index and one document per
// group-version. kubectl reads
// them to learn that the server validates fields itself (the PATCH
// operation's fieldValidation parameter), so it sends fieldValidation=Strict
// instead of validating on the client against /openapi/v2 (not served).
// Schemas: a custom resource's is its CRD's; built-in types get an open
// object, and their PATCH does not advertise strategic merge, so kubectl
// computes strategic merge patches from its compiled-in types.
import crypto from 'node:crypto';

const gvkOf = (type) => ({ group: type.group, version: type.version, kind: type.kind });
const schemaName = (type) => `${type.group ? type.group.split('.').reverse().join('.') : 'io.k8s.api.core'}.${type.version}.${type.kind}`;
const prefixOf = (group, version) => (group ? `apis/${group}/${version}` : `api/${version}`);

function itemPath(type) {
  const namespace = type.namespaced ? 'namespaces/{namespace}/' : '';
  return `/${prefixOf(type.group, type.version)}/${namespace}${type.plural}/{name}`;
}

function operations(type) {
  const patchTypes = ['application/json-patch+json', 'application/merge-patch+json'];
  const reference = { $ref: `#/components/schemas/${schemaName(type)}` };
  const response = { 200: { description: 'OK', content: { 'application/json': { schema: reference } } } };
  const fieldValidation = { name: 'fieldValidation', in: 'query', schema: { type: 'string', uniqueItems: true } };
  const extension = { 'x-kubernetes-group-version-kind': gvkOf(type) };
  return {
    get: { operationId: `read${type.kind}`, responses: response, ...extension, 'x-kubernetes-action': 'get' },
    put: { operationId: `replace${type.kind}`, parameters: [fieldValidation], responses: response, ...extension, 'x-kubernetes-action': 'put' },
    patch: {
      operationId: `patch${type.kind}`, parameters: [fieldValidation],
      requestBody: { content: Object.fromEntries(patchTypes.map((name) => [name, { schema: { type: 'object' } }])) },
      responses: response, ...extension, 'x-kubernetes-action': 'patch',
    },
  };
}

function document(types) {
  const paths = Object.fromEntries(types.map((type) => [itemPath(type), operations(type)]));
  const schemas = Object.fromEntries(types.map((type) => [schemaName(type), {
    ...(type.schema ?? { type: 'object', 'x-kubernetes-preserve-unknown-fields': true }),
    'x-kubernetes-group-version-kind': [gvkOf(type)],
  }]));
  return { openapi: '3.0.0', info: { title: 'Kubernetes', version: 'v1.32.4' }, paths, components: { schemas } };
}

export class OpenApi {
  constructor(registry) {
    this.registry = registry;
  }

  // {path prefix "api/v1" | "apis/G/V" -> document}, rebuilt from the current types.
  documents() {
    const byPrefix = new Map();
    for (const type of this.registry.types) {
      const prefix = prefixOf(type.group, type.version);
      if (!byPrefix.has(prefix)) byPrefix.set(prefix, []);
      byPrefix.get(prefix).push(type);
    }
    return new Map([...byPrefix].map(([prefix, types]) => [prefix, document(types)]));
  }

  index() {
    const paths = {};
    for (const [prefix, body] of this.documents()) {
      const hash = crypto.createHash('sha512').update(JSON.stringify(body)).digest('hex').slice(0, 64).toUpperCase();
      paths[prefix] = { serverRelativeURL: `/openapi/v3/${prefix}?hash=${hash}` };
    }
    return { paths };
  }

  // GET /openapi/v3/<prefix>, or undefined.
  find(prefix) {
    return this.documents().get(prefix);
  }
}


// Protobuf encoding of gnostic's openapi_v2.Document with swagger (1), info
// (2: title 1, version 2) and empty paths (8).
function protobufField(number, bytes) {
  const varint = (value) => {
    const out = [];
    for (; value > 127; value >>>= 7) out.push((value & 127) | 128);
    out.push(value);
    return Buffer.from(out);
  };
  return Buffer.concat([varint((number << 3) | 2), varint(bytes.length), bytes]);
}

export const OPENAPI_V2_PROTOBUF = 'application/com.github.proto-openapi.spec.v2.v1.0+protobuf';

export function openApiV2(accept) {
  const info = { title: 'Kubernetes', version: 'v1.32.4' };
  if (!(accept ?? '').includes('protobuf')) return { swagger: '2.0', info, paths: {} };
  const text = (value) => Buffer.from(value, 'utf8');
  return Buffer.concat([
    protobufField(1, text('2.0')),
    protobufField(2, Buffer.concat([protobufField(1, text(info.title)), protobufField(2, text(info.version))])),
    protobufField(8, Buffer.alloc(0)),
  ]);
}
