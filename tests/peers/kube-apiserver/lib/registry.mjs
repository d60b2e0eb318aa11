// The resource types this server serves: a fixed set of built-in ones plus
// whatever the stored CustomResourceDefinitions declare, and the legacy
// discovery documents (/api, /apis, /api/v1, /apis/<group>/<version>) built
// from them.

const ALL_VERBS = ['create', 'delete', 'deletecollection', 'get', 'list', 'patch', 'update', 'watch'];
const STATUS_VERBS = ['get', 'patch', 'update'];

// status: has a status subresource; generation: keeps metadata.generation.
const BUILTIN_TYPES = [
  { group: '', version: 'v1', plural: 'namespaces', kind: 'Namespace', namespaced: false, shortNames: ['ns'], status: true },
  { group: '', version: 'v1', plural: 'nodes', kind: 'Node', namespaced: false, shortNames: ['no'], status: true },
  { group: '', version: 'v1', plural: 'secrets', kind: 'Secret', namespaced: true },
  { group: '', version: 'v1', plural: 'configmaps', kind: 'ConfigMap', namespaced: true, shortNames: ['cm'] },
  { group: '', version: 'v1', plural: 'events', kind: 'Event', namespaced: true, shortNames: ['ev'] },
  { group: '', version: 'v1', plural: 'pods', kind: 'Pod', namespaced: true, shortNames: ['po'], categories: ['all'], status: true },
  { group: '', version: 'v1', plural: 'serviceaccounts', kind: 'ServiceAccount', namespaced: true, shortNames: ['sa'] },
  { group: 'apps', version: 'v1', plural: 'daemonsets', kind: 'DaemonSet', namespaced: true, shortNames: ['ds'], categories: ['all'], status: true, generation: true },
  { group: 'rbac.authorization.k8s.io', version: 'v1', plural: 'clusterroles', kind: 'ClusterRole', namespaced: false },
  { group: 'rbac.authorization.k8s.io', version: 'v1', plural: 'clusterrolebindings', kind: 'ClusterRoleBinding', namespaced: false },
  { group: 'rbac.authorization.k8s.io', version: 'v1', plural: 'roles', kind: 'Role', namespaced: true },
  { group: 'rbac.authorization.k8s.io', version: 'v1', plural: 'rolebindings', kind: 'RoleBinding', namespaced: true },
  { group: 'apiextensions.k8s.io', version: 'v1', plural: 'customresourcedefinitions', kind: 'CustomResourceDefinition', namespaced: false, shortNames: ['crd', 'crds'], status: true, generation: true },
].map((type) => ({ ...type, singular: type.kind.toLowerCase(), builtin: true }));

export const apiVersionOf = (type) => (type.group ? `${type.group}/${type.version}` : type.version);
// Storage is per group and resource: every version of a CRD shares it.
export const storageKey = (type) => `${type.group}/${type.plural}`;

function typesOfCrd(crd) {
  const { group, names = {}, scope, versions = [] } = crd.spec ?? {};
  return versions.filter((version) => version.served).map((version) => ({
    group, version: version.name, plural: names.plural, singular: names.singular ?? names.kind?.toLowerCase(),
    kind: names.kind, listKind: names.listKind, namespaced: scope !== 'Cluster', shortNames: names.shortNames,
    categories: names.categories, status: Boolean(version.subresources?.status), generation: true, builtin: false,
    schema: version.schema?.openAPIV3Schema, printerColumns: version.additionalPrinterColumns ?? [],
  }));
}

export class Registry {
  constructor() {
    this.types = [...BUILTIN_TYPES];
  }

  // Called with every stored CRD whenever one changes.
  setCrds(crds) {
    const established = crds.filter((crd) => !crd.metadata.deletionTimestamp);
    this.types = [...BUILTIN_TYPES, ...established.flatMap(typesOfCrd)];
  }

  find(group, version, plural) {
    return this.types.find((type) => type.group === group && type.version === version && type.plural === plural);
  }

  groups() {
    const groups = new Map();
    for (const type of this.types.filter((candidate) => candidate.group !== '')) {
      if (!groups.has(type.group)) groups.set(type.group, []);
      const versions = groups.get(type.group);
      if (!versions.includes(type.version)) versions.push(type.version);
    }
    return groups;
  }

  apiVersions(serverAddress) {
    return {
      kind: 'APIVersions', versions: ['v1'],
      serverAddressByClientCIDRs: [{ clientCIDR: '0.0.0.0/0', serverAddress }],
    };
  }

  apiGroup(name, versions) {
    const entries = versions.map((version) => ({ groupVersion: `${name}/${version}`, version }));
    return { name, versions: entries, preferredVersion: entries[0] };
  }

  apiGroupList() {
    const groups = [...this.groups()].map(([name, versions]) => this.apiGroup(name, versions));
    return { kind: 'APIGroupList', apiVersion: 'v1', groups };
  }

  apiGroupDocument(name) {
    const versions = this.groups().get(name);
    return versions ? { kind: 'APIGroup', apiVersion: 'v1', ...this.apiGroup(name, versions) } : undefined;
  }

  apiResourceList(group, version) {
    const types = this.types.filter((type) => type.group === group && type.version === version);
    if (!types.length) return undefined;
    const resources = types.flatMap((type) => {
      const resource = {
        name: type.plural, singularName: type.singular, namespaced: type.namespaced, kind: type.kind, verbs: ALL_VERBS,
      };
      if (type.shortNames?.length) resource.shortNames = type.shortNames;
      if (type.categories?.length) resource.categories = type.categories;
      const status = { name: `${type.plural}/status`, singularName: '', namespaced: type.namespaced, kind: type.kind, verbs: STATUS_VERBS };
      return type.status ? [resource, status] : [resource];
    });
    return { kind: 'APIResourceList', apiVersion: 'v1', groupVersion: group ? `${group}/${version}` : version, resources };
  }
}
