/**
 * DynamoDB's item size, computed by its published rules (CapacityUnitCalculations): a string is its
 * UTF-8 length, a number about one byte per two significant digits plus one, a boolean or null one
 * byte, a list or map 3 bytes plus 1 byte per element, and every attribute name its UTF-8 length.
 * Used to prove that a node record stays well under the 400 KB item limit.
 */
export function dynamoItemSizeBytes(item: object): number {
  let total = 0;
  for (const [name, value] of Object.entries(item as Record<string, unknown>)) {
    if (value === undefined) continue;
    total += Buffer.byteLength(name, 'utf8') + valueSizeBytes(value);
  }
  return total;
}

function valueSizeBytes(value: unknown): number {
  if (value === null || typeof value === 'boolean') return 1;
  if (typeof value === 'string') return Buffer.byteLength(value, 'utf8');
  if (typeof value === 'number') {
    const significantDigits = String(Math.abs(value)).replace(/[.-]/g, '').replace(/^0+/, '').length;
    return Math.ceil(significantDigits / 2) + 1;
  }
  if (Array.isArray(value)) {
    return 3 + value.reduce<number>((sum, element) => sum + 1 + valueSizeBytes(element), 0);
  }
  if (typeof value === 'object') {
    const entries = Object.entries(value as Record<string, unknown>).filter(([, v]) => v !== undefined);
    return (
      3 +
      entries.reduce(
        (sum, [name, element]) => sum + 1 + Buffer.byteLength(name, 'utf8') + valueSizeBytes(element),
        0,
      )
    );
  }
  throw new Error(`cannot size a ${typeof value} attribute`);
}
