// labelSelector and fieldSelector query parameters, parsed into predicates.
import { errors } from './status.mjs';

// Splits "a=b,c in (x,y)" at the commas outside parentheses.
function requirements(text) {
  const parts = [];
  let depth = 0;
  let start = 0;
  for (let i = 0; i < text.length; i++) {
    if (text[i] === '(') depth++;
    else if (text[i] === ')') depth--;
    else if (text[i] === ',' && depth === 0) {
      parts.push(text.slice(start, i));
      start = i + 1;
    }
  }
  parts.push(text.slice(start));
  return parts.map((part) => part.trim()).filter((part) => part !== '');
}

function valueSet(text, selector) {
  const match = /^\((.*)\)$/.exec(text.trim());
  if (!match) throw errors.badRequest(`unable to parse requirement: found '${text}', expected: '('`);
  const values = match[1].split(',').map((value) => value.trim());
  if (values.some((value) => value === '')) throw errors.badRequest(`invalid selector: '${selector}'`);
  return new Set(values);
}

// One label requirement: key, !key, key=v, key==v, key!=v, key in (..), key notin (..).
function labelRequirement(text) {
  let match;
  if ((match = /^!\s*([^\s=!(),]+)$/.exec(text))) return (labels) => !(match[1] in labels);
  if ((match = /^([^\s=!(),]+)\s*(==|=|!=)\s*([^\s=!(),]*)$/.exec(text))) {
    const [, key, op, value] = match;
    return op === '!=' ? (labels) => labels[key] !== value : (labels) => labels[key] === value;
  }
  if ((match = /^([^\s=!(),]+)\s+(in|notin)\s+(\(.*\))$/.exec(text))) {
    const [, key, op, set] = match;
    const values = valueSet(set, text);
    return op === 'in' ? (labels) => values.has(labels[key]) : (labels) => !values.has(labels[key]);
  }
  if ((match = /^([^\s=!(),]+)$/.exec(text))) return (labels) => match[1] in labels;
  throw errors.badRequest(`unable to parse requirement: invalid label selector: '${text}'`);
}

export function labelSelector(text) {
  const predicates = requirements(text ?? '').map(labelRequirement);
  return (object) => {
    const labels = object?.metadata?.labels ?? {};
    return predicates.every((predicate) => predicate(labels));
  };
}

function fieldValue(object, path) {
  let value = object;
  for (const part of path.split('.')) value = value?.[part];
  if (value === undefined || value === null) return '';
  return String(value);
}

// Field selectors on any dotted path (the real server allows only a few per
// type; metadata.name and metadata.namespace work everywhere there too).
export function fieldSelector(text) {
  const predicates = requirements(text ?? '').map((part) => {
    const match = /^([A-Za-z0-9_.]+)\s*(==|=|!=)\s*(.*)$/.exec(part);
    if (!match) throw errors.badRequest(`invalid field selector: '${part}'`);
    const [, path, op, value] = match;
    return op === '!=' ? (object) => fieldValue(object, path) !== value
                       : (object) => fieldValue(object, path) === value;
  });
  return (object) => predicates.every((predicate) => predicate(object));
}
