import { badRequest } from './status.ts';

/**
 * Label and field selectors as the API server parses them (k8s.io/apimachinery `labels.Parse`,
 * `fields.ParseSelector`). Custom resources support only the `metadata.name` and
 * `metadata.namespace` field selectors (plus any `selectableFields`, which CiliumNode has none of).
 */

export interface SelectableObject {
  metadata: { name: string; labels?: Record<string, string> };
}

export type Selector = (object: SelectableObject) => boolean;

const matchAll: Selector = () => true;

/** Splits on commas that are not inside `( … )`. */
function splitRequirements(text: string): string[] {
  const parts: string[] = [];
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
  return parts.map((p) => p.trim());
}

const KEY = '([A-Za-z0-9][-A-Za-z0-9_./]*)';
const VALUE = '([-A-Za-z0-9_.]*)';

function parseRequirement(text: string): Selector {
  const labelsOf = (o: SelectableObject) => o.metadata.labels ?? {};
  let m = new RegExp(`^${KEY}\\s*(==|=|!=)\\s*${VALUE}$`).exec(text);
  if (m !== null) {
    const [, key, op, value] = m as unknown as [string, string, string, string];
    return op === '!=' ? (o) => labelsOf(o)[key] !== value : (o) => labelsOf(o)[key] === value;
  }
  m = new RegExp(`^${KEY}\\s+(in|notin)\\s*\\(([^)]*)\\)$`).exec(text);
  if (m !== null) {
    const [, key, op, list] = m as unknown as [string, string, string, string];
    const values = new Set(list.split(',').map((v) => v.trim()));
    return op === 'in'
      ? (o) => values.has(labelsOf(o)[key] ?? '\u0000absent')
      : (o) => !values.has(labelsOf(o)[key] ?? '\u0000absent');
  }
  m = new RegExp(`^(!?)${KEY}$`).exec(text);
  if (m !== null) {
    const [, negate, key] = m as unknown as [string, string, string];
    return negate === '!' ? (o) => !Object.hasOwn(labelsOf(o), key) : (o) => Object.hasOwn(labelsOf(o), key);
  }
  throw badRequest(`unable to parse requirement: invalid label selector "${text}"`);
}

/** `labelSelector=` (equality- and set-based); an empty selector matches everything. */
export function parseLabelSelector(text: string | null): Selector {
  if (text === null || text.trim() === '') return matchAll;
  const requirements = splitRequirements(text).map(parseRequirement);
  return (object) => requirements.every((r) => r(object));
}

/** `fieldSelector=`: `metadata.name` with `=`, `==` or `!=`; `metadata.namespace` is always "". */
export function parseFieldSelector(text: string | null): Selector {
  if (text === null || text.trim() === '') return matchAll;
  const requirements = text.split(',').map((part): Selector => {
    const m = /^\s*([^=!\s]+)\s*(==|=|!=)\s*(.*?)\s*$/.exec(part);
    if (m === null) throw badRequest(`invalid selector: '${text}'; can't understand '${part}'`);
    const [, field, op, value] = m as unknown as [string, string, string, string];
    let read: (o: SelectableObject) => string;
    if (field === 'metadata.name') read = (o) => o.metadata.name;
    else if (field === 'metadata.namespace') read = () => '';
    else
      throw badRequest(
        `"${field}" is not a known field selector: only "metadata.name", "metadata.namespace"`,
      );
    return op === '!=' ? (o) => read(o) !== value : (o) => read(o) === value;
  });
  return (object) => requirements.every((r) => r(object));
}
