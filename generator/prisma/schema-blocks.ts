// Locates the text span of top-level blocks ("generator client { ... }") in a
// Prisma schema.
//
// This is deliberately NOT a Prisma parser: Prisma's wasm exposes block
// contents (getConfig, DMMF) but not their positions, so this only finds
// brace-delimited top-level spans, ignoring braces inside comments and string
// literals. Callers cross-check the result against getConfig/DMMF (see
// forced-generator.ts), so a span found wrongly is detected, not silently used.

export interface TopLevelBlock {
  /** "generator", "datasource", "model", "enum", "view", "type". */
  keyword: string;
  name: string;
  /** Offset of the keyword. */
  start: number;
  /** Offset just after the closing brace. */
  end: number;
}

/** Same length as `text`, with comment and string-literal contents blanked, so braces left are structural. */
function maskCommentsAndStrings(text: string): string {
  const chars = text.split('');
  let i = 0;
  while (i < chars.length) {
    if (chars[i] === '/' && chars[i + 1] === '/') {
      while (i < chars.length && chars[i] !== '\n') chars[i++] = ' ';
    } else if (chars[i] === '"') {
      i++;
      // Prisma string literals cannot span lines; stopping at a newline keeps a
      // stray quote from masking the rest of the file.
      while (i < chars.length && chars[i] !== '"' && chars[i] !== '\n') {
        if (chars[i] === '\\' && i + 1 < chars.length && chars[i + 1] !== '\n') chars[i++] = ' ';
        chars[i++] = ' ';
      }
      i++;
    } else {
      i++;
    }
  }
  return chars.join('');
}

export function findTopLevelBlocks(text: string): TopLevelBlock[] {
  const masked = maskCommentsAndStrings(text);
  const blocks: TopLevelBlock[] = [];
  let depth = 0;
  let lastEnd = 0;
  let open: { keyword: string; name: string; start: number } | undefined;
  for (let i = 0; i < masked.length; i++) {
    const ch = masked[i];
    if (ch === '{') {
      if (depth === 0) {
        const header = masked.slice(lastEnd, i);
        const match = /([A-Za-z_][\w]*)\s+([A-Za-z_][\w]*)\s*$/.exec(header);
        open = match ? { keyword: match[1], name: match[2], start: lastEnd + match.index } : undefined;
      }
      depth++;
    } else if (ch === '}' && depth > 0) {
      depth--;
      if (depth === 0) {
        if (open) blocks.push({ ...open, end: i + 1 });
        open = undefined;
        lastEnd = i + 1;
      }
    }
  }
  return blocks;
}
