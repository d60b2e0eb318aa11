// What the real server does with a custom resource's structural schema
// (CRD spec.versions[].schema.openAPIV3Schema): apply defaults, prune fields
// the schema does not declare, and validate (type, required, enum, pattern,
// bounds, oneOf/anyOf/allOf/not). Not implemented: CEL rules
// (x-kubernetes-validations), format checks, list-type uniqueness.
import { clone } from './patch.mjs';

const isObject = (value) => value !== null && typeof value === 'object' && !Array.isArray(value);

function childSchema(schema, key) {
  if (schema?.properties?.[key]) return schema.properties[key];
  if (isObject(schema?.additionalProperties)) return schema.additionalProperties;
  return undefined;
}

export function applyDefaults(value, schema) {
  if (!schema) return;
  if (isObject(value)) {
    for (const [key, property] of Object.entries(schema.properties ?? {})) {
      if (value[key] === undefined && property.default !== undefined) value[key] = clone(property.default);
    }
    for (const key of Object.keys(value)) applyDefaults(value[key], childSchema(schema, key));
  } else if (Array.isArray(value)) {
    for (const item of value) applyDefaults(item, schema.items);
  }
}

// Returns the paths of the fields removed ("spec.foo").
export function prune(value, schema, path, removed = []) {
  if (!schema || schema['x-kubernetes-preserve-unknown-fields'] && !schema.properties) return removed;
  if (isObject(value)) {
    const keepUnknown = schema['x-kubernetes-preserve-unknown-fields'] === true || schema.additionalProperties === true;
    for (const key of Object.keys(value)) {
      const child = childSchema(schema, key);
      if (child) prune(value[key], child, `${path}.${key}`, removed);
      else if (!keepUnknown && !schema['x-kubernetes-embedded-resource']) {
        removed.push(`${path}.${key}`);
        delete value[key];
      }
    }
  } else if (Array.isArray(value)) {
    value.forEach((item, index) => prune(item, schema.items, `${path}[${index}]`, removed));
  }
  return removed;
}

function typeOf(value) {
  if (value === null) return 'null';
  if (Array.isArray(value)) return 'array';
  if (typeof value === 'number') return Number.isInteger(value) ? 'integer' : 'number';
  return typeof value;
}

function typeMatches(expected, value) {
  const actual = typeOf(value);
  return expected === actual || (expected === 'number' && actual === 'integer');
}

const show = (value) => JSON.stringify(value);

// Returns causes: [{reason, message, field}] with the real server's wording.
export function validate(value, schema, field, causes = []) {
  if (!schema) return causes;
  const add = (reason, message) => causes.push({ reason, message, field });
  if (value === null) {
    if (!schema.nullable && schema.type) add('FieldValueTypeInvalid', `Invalid value: "null": ${field} in body must be of type ${schema.type}: "null"`);
    return causes;
  }
  if (schema['x-kubernetes-int-or-string']) {
    if (!['integer', 'string'].includes(typeOf(value))) add('FieldValueTypeInvalid', `Invalid value: ${show(value)}: ${field} in body must be of type integer or string`);
  } else if (schema.type && !typeMatches(schema.type, value)) {
    add('FieldValueTypeInvalid', `Invalid value: "${typeOf(value)}": ${field} in body must be of type ${schema.type}: "${typeOf(value)}"`);
    return causes;
  }
  if (schema.enum && !schema.enum.some((option) => JSON.stringify(option) === JSON.stringify(value))) {
    add('FieldValueNotSupported', `Unsupported value: ${show(value)}: supported values: ${schema.enum.map(show).join(', ')}`);
  }
  if (typeof value === 'string') {
    if (schema.pattern && !new RegExp(schema.pattern, 'u').test(value)) add('FieldValueInvalid', `Invalid value: ${show(value)}: ${field} in body should match '${schema.pattern}'`);
    if (schema.maxLength !== undefined && [...value].length > schema.maxLength) add('FieldValueTooLong', `Too long: may not be more than ${schema.maxLength} bytes`);
    if (schema.minLength !== undefined && [...value].length < schema.minLength) add('FieldValueInvalid', `Invalid value: ${show(value)}: ${field} in body should be at least ${schema.minLength} chars long`);
  }
  if (typeof value === 'number') {
    if (schema.minimum !== undefined && value < schema.minimum) add('FieldValueInvalid', `Invalid value: ${value}: ${field} in body should be greater than or equal to ${schema.minimum}`);
    if (schema.maximum !== undefined && value > schema.maximum) add('FieldValueInvalid', `Invalid value: ${value}: ${field} in body should be less than or equal to ${schema.maximum}`);
  }
  if (Array.isArray(value)) {
    if (schema.maxItems !== undefined && value.length > schema.maxItems) add('FieldValueTooMany', `Too many: ${value.length}: must have at most ${schema.maxItems} items`);
    if (schema.minItems !== undefined && value.length < schema.minItems) add('FieldValueInvalid', `Invalid value: ${value.length}: ${field} in body should have at least ${schema.minItems} items`);
    value.forEach((item, index) => validate(item, schema.items, `${field}[${index}]`, causes));
    if (schema['x-kubernetes-list-type'] === 'set') {
      value.forEach((item, index) => {
        if (value.findIndex((other) => JSON.stringify(other) === JSON.stringify(item)) < index) {
          causes.push({ reason: 'FieldValueDuplicate', message: `Duplicate value: ${show(item)}`, field: `${field}[${index}]` });
        }
      });
    }
  }
  if (isObject(value)) {
    for (const key of schema.required ?? []) {
      if (value[key] === undefined) causes.push({ reason: 'FieldValueRequired', message: 'Required value', field: `${field}.${key}` });
    }
    for (const [key, item] of Object.entries(value)) validate(item, childSchema(schema, key), `${field}.${key}`, causes);
  }
  validateCombinators(value, schema, field, causes);
  return causes;
}

function validateCombinators(value, schema, field, causes) {
  const passes = (subschema) => validate(value, subschema, field, []).length === 0;
  for (const subschema of schema.allOf ?? []) validate(value, subschema, field, causes);
  if (schema.oneOf && schema.oneOf.filter(passes).length !== 1) {
    causes.push({ reason: 'FieldValueInvalid', message: `Invalid value: ${show(value)}: ${field} in body must validate one and only one schema (oneOf)`, field });
  }
  if (schema.anyOf && !schema.anyOf.some(passes)) {
    causes.push({ reason: 'FieldValueInvalid', message: `Invalid value: ${show(value)}: ${field} in body must validate at least one schema (anyOf)`, field });
  }
  if (schema.not && passes(schema.not)) {
    causes.push({ reason: 'FieldValueInvalid', message: `Invalid value: ${show(value)}: ${field} in body should not be valid against schema (not)`, field });
  }
}
