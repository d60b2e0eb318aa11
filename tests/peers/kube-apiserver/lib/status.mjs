// Kubernetes Status objects and the errors that carry them, with the reasons,
// codes and messages the real API server uses.

export class ApiError extends Error {
  constructor(code, reason, message, details = {}) {
    super(message);
    this.code = code;
    this.reason = reason;
    this.details = details;
  }

  toStatus() {
    return failureStatus(this.code, this.reason, this.message, this.details);
  }
}

function failureStatus(code, reason, message, details = {}) {
  const status = { kind: 'Status', apiVersion: 'v1', metadata: {}, status: 'Failure', message, reason };
  if (Object.keys(details).length) status.details = details;
  status.code = code;
  return status;
}

export function successStatus(details) {
  return { kind: 'Status', apiVersion: 'v1', metadata: {}, status: 'Success', details };
}

// "configmaps" or "instances.akri.sh": how the real server names a resource in messages.
function groupResource(type) {
  return type.group ? `${type.plural}.${type.group}` : type.plural;
}

function objectDetails(type, name, extra = {}) {
  const details = { name };
  if (type.group) details.group = type.group;
  details.kind = type.plural;
  return { ...details, ...extra };
}

export const errors = {
  notFound: (type, name) =>
    new ApiError(404, 'NotFound', `${groupResource(type)} "${name}" not found`, objectDetails(type, name)),
  namespaceNotFound: (name) =>
    new ApiError(404, 'NotFound', `namespaces "${name}" not found`, { name, kind: 'namespaces' }),
  noSuchPath: () => new ApiError(404, 'NotFound', 'the server could not find the requested resource', {}),
  alreadyExists: (type, name) =>
    new ApiError(409, 'AlreadyExists', `${groupResource(type)} "${name}" already exists`, objectDetails(type, name)),
  conflict: (type, name, why = 'the object has been modified; please apply your changes to the latest version and try again') =>
    new ApiError(409, 'Conflict', `Operation cannot be fulfilled on ${groupResource(type)} "${name}": ${why}`,
      objectDetails(type, name)),
  badRequest: (message) => new ApiError(400, 'BadRequest', message),
  unauthorized: () => new ApiError(401, 'Unauthorized', 'Unauthorized'),
  methodNotAllowed: (method) =>
    new ApiError(405, 'MethodNotAllowed', `the server does not allow this method on the requested resource (${method})`),
  unsupportedMediaType: (accepted) =>
    new ApiError(415, 'UnsupportedMediaType',
      `the body of the request was in an unknown format - accepted media types include: ${accepted.join(', ')}`),
  // causes: [{field, message, reason}] in the real server's FieldValueInvalid style.
  invalid: (type, name, causes) =>
    new ApiError(422, 'Invalid',
      `${type.kind}${type.group ? '.' + type.group : ''} "${name}" is invalid: ` +
        causes.map((cause) => `${cause.field}: ${cause.message}`).join(', '),
      objectDetails(type, name, { kind: type.kind, causes })),
  expired: (message) => new ApiError(410, 'Expired', message),
  // API Priority and Fairness turning a request away, with its Retry-After header.
  tooManyRequests: () =>
    Object.assign(new ApiError(429, 'TooManyRequests', 'Too many requests, please try again later.',
      { retryAfterSeconds: 1 }), { headers: { 'Retry-After': '1' } }),
  // A watch from a resourceVersion the server has not reached (after an etcd
  // restore, say): the watch cache's error, with the cause clients look for.
  tooLargeResourceVersion: (requested, current) =>
    new ApiError(504, 'Timeout', `Timeout: Too large resource version: ${requested}, current: ${current}`,
      { causes: [{ reason: 'ResourceVersionTooLarge', message: 'Too large resource version' }], retryAfterSeconds: 1 }),
  // RBAC's refusal, in its wording.
  forbidden: (type, verb, namespace, user) =>
    new ApiError(403, 'Forbidden',
      `${groupResource(type)} is forbidden: User "${user}" cannot ${verb} resource "${type.plural}" in API group ` +
        `"${type.group}" ${namespace ? `in the namespace "${namespace}"` : 'at the cluster scope'}`,
      type.group ? { group: type.group, kind: type.plural } : { kind: type.plural }),
  internal: (message) => new ApiError(500, 'InternalError', `Internal error occurred: ${message}`,
    { causes: [{ message }] }),
};
