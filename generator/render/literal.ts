/** Deterministic TypeScript object literals (single quotes, fixed indentation) for generated data. */
export function literal(value: unknown, indent = ''): string {
  const next = `${indent}  `;
  if (value === null) return 'null';
  if (typeof value === 'string') return `'${value.replace(/\\/g, '\\\\').replace(/'/g, "\\'")}'`;
  if (typeof value === 'number' || typeof value === 'boolean') return String(value);
  if (Array.isArray(value)) {
    if (value.length === 0) return '[]';
    if (
      value.every(
        (v) => typeof v !== 'object' || v === null || (Array.isArray(v) && v.every((x) => typeof x !== 'object')),
      )
    )
      return `[${value.map((v) => literal(v)).join(', ')}]`;
    return `[\n${value.map((v) => `${next}${literal(v, next)},`).join('\n')}\n${indent}]`;
  }
  if (typeof value === 'object') {
    const entries = Object.entries(value as Record<string, unknown>).filter(([, v]) => v !== undefined);
    if (entries.length === 0) return '{}';
    const key = (k: string) => (/^[A-Za-z_$][\w$]*$/.test(k) ? k : literal(k));
    const flat = entries.every(
      ([, v]) => typeof v !== 'object' || v === null || (Array.isArray(v) && v.every((x) => typeof x !== 'object')),
    );
    if (flat) {
      const oneLine = `{ ${entries.map(([k, v]) => `${key(k)}: ${literal(v)}`).join(', ')} }`;
      if (oneLine.length + indent.length <= 160) return oneLine;
    }
    return `{\n${entries.map(([k, v]) => `${next}${key(k)}: ${literal(v, next)},`).join('\n')}\n${indent}}`;
  }
  throw new Error(`cannot write ${typeof value} as a literal`);
}
