/**
 * A small XML writer for EC2 Query responses. A response body is described as a plain value:
 * an object becomes child elements in key order, an array becomes the EC2 list shape
 * `<xSet><item>…</item></xSet>`, `undefined`/`null` leave the element out, and scalars become
 * escaped text. Element names are written exactly as given (EC2 uses lowerCamel names).
 */
export type XmlValue = string | number | boolean | undefined | null | XmlObject | readonly XmlValue[];
export interface XmlObject {
  readonly [element: string]: XmlValue;
}

const XML_ESCAPES: Record<string, string> = {
  '&': '&amp;',
  '<': '&lt;',
  '>': '&gt;',
  '"': '&quot;',
  "'": '&apos;',
};

export function escapeXml(text: string): string {
  return text.replace(/[&<>"']/g, (character) => XML_ESCAPES[character] ?? character);
}

export function renderElement(name: string, value: XmlValue): string {
  if (value === undefined || value === null) return '';
  if (Array.isArray(value)) {
    const items = value.map((item: XmlValue) => renderElement('item', item)).join('');
    return items === '' ? `<${name}/>` : `<${name}>${items}</${name}>`;
  }
  if (typeof value === 'object') return `<${name}>${renderChildren(value as XmlObject)}</${name}>`;
  return `<${name}>${escapeXml(String(value))}</${name}>`;
}

export function renderChildren(object: XmlObject): string {
  return Object.entries(object)
    .map(([name, value]) => renderElement(name, value))
    .join('');
}

/** A whole document: the XML declaration and a root element with an optional xmlns. */
export function renderDocument(rootName: string, body: XmlObject, namespace?: string): string {
  const xmlns = namespace ? ` xmlns="${escapeXml(namespace)}"` : '';
  return `<?xml version="1.0" encoding="UTF-8"?>\n<${rootName}${xmlns}>${renderChildren(body)}</${rootName}>`;
}
