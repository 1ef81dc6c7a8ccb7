/**
 * The rules the runtime holds a project's auth hooks to (docs/own-code.md "Auth hooks"): what
 * `claims` may add to an access token and what `mail` may answer. Checked on every call, since
 * what a hook returns is only typed, not proved.
 */
import type { RenderedMail } from './definitions.ts';

/** At most this many bytes of extra claims, serialised as JSON (UTF-8): a token travels in every request's header. */
export const MAX_EXTRA_CLAIMS_BYTES = 1024;

/**
 * Claims `claims()` may not set: the registered JWT claims (RFC 7519 §4.1) and those svcgen reads
 * (`sid`, `email`, `roles`). Names starting with `svcgen` are kept for svcgen's own later claims.
 */
export const RESERVED_CLAIMS: readonly string[] = [
  'iss',
  'sub',
  'aud',
  'exp',
  'nbf',
  'iat',
  'jti',
  'sid',
  'email',
  'roles',
];

/** Where `value` is not plain JSON (null, boolean, finite number, string, array, plain object): its path. */
function notJson(value: unknown, path: string, depth: number): string | undefined {
  if (depth > 32) return `${path} (nested deeper than 32 levels)`;
  if (value === null || typeof value === 'string' || typeof value === 'boolean') return undefined;
  if (typeof value === 'number') return Number.isFinite(value) ? undefined : `${path} (${value} is not a JSON number)`;
  if (Array.isArray(value)) {
    for (let i = 0; i < value.length; i++) {
      const bad = notJson(value[i], `${path}[${i}]`, depth + 1);
      if (bad) return bad;
    }
    return undefined;
  }
  if (typeof value === 'object') {
    const proto = Object.getPrototypeOf(value);
    if (proto !== Object.prototype && proto !== null)
      return `${path} (a ${proto?.constructor?.name ?? 'class'} object)`;
    for (const [key, member] of Object.entries(value)) {
      const bad = notJson(member, `${path}.${key}`, depth + 1);
      if (bad) return bad;
    }
    return undefined;
  }
  return `${path} (${value === undefined ? 'undefined' : `a ${typeof value}`})`;
}

/**
 * The extra claims as they go into the token, or what is wrong with them (a message for the log
 * that names the hook and the rule, never a value).
 */
export function checkExtraClaims(
  claims: unknown,
): { ok: true; claims: Record<string, unknown> } | { ok: false; problem: string } {
  const fail = (problem: string) => ({ ok: false as const, problem: `auth.claims of your code: ${problem}` });
  if (claims === undefined || claims === null) return { ok: true, claims: {} };
  if (typeof claims !== 'object' || Array.isArray(claims)) return fail('must return an object of claims (or nothing)');
  const names = Object.keys(claims);
  const reserved = names.filter((name) => RESERVED_CLAIMS.includes(name) || name.startsWith('svcgen'));
  if (reserved.length > 0)
    return fail(
      `the claims ${reserved.map((n) => JSON.stringify(n)).join(', ')} are reserved (${RESERVED_CLAIMS.join(', ')}, and names starting with svcgen)`,
    );
  const bad = notJson(claims, 'claims', 0);
  if (bad) return fail(`every claim must be plain JSON; ${bad} is not`);
  const bytes = Buffer.byteLength(JSON.stringify(claims), 'utf8');
  if (bytes > MAX_EXTRA_CLAIMS_BYTES)
    return fail(`the claims take ${bytes} bytes as JSON, more than the ${MAX_EXTRA_CLAIMS_BYTES} allowed`);
  return { ok: true, claims: claims as Record<string, unknown> };
}

/** What `mail()` answered, checked: the mail to send, 'sent', undefined (svcgen's own), or what is wrong. */
export function checkMailAnswer(
  answer: unknown,
): { ok: true; answer: RenderedMail | 'sent' | undefined } | { ok: false; problem: string } {
  if (answer === undefined || answer === 'sent') return { ok: true, answer };
  const fail = (problem: string) => ({
    ok: false as const,
    problem: `auth.mail of your code: ${problem}; return { subject, text, html? }, 'sent' or undefined`,
  });
  if (typeof answer !== 'object' || answer === null)
    return fail(`it returned a ${answer === null ? 'null' : typeof answer}`);
  const { subject, text, html } = answer as Record<string, unknown>;
  const problem = mailContentProblem(subject, text, html);
  if (problem) return fail(problem);
  return { ok: true, answer: { subject, text, ...(html !== undefined ? { html } : {}) } as RenderedMail };
}

/**
 * What is wrong with a mail's subject, text and HTML alternative, if anything: the one check of
 * the mails user code renders (auth.mail) and sends (ctx.mail, ./context.ts).
 */
export function mailContentProblem(subject: unknown, text: unknown, html: unknown): string | undefined {
  if (typeof subject !== 'string' || subject.trim() === '') return 'subject must be a non-empty string';
  if (/[\r\n]/.test(subject)) return 'subject must be one line';
  if (typeof text !== 'string') return 'text must be a string';
  if (html !== undefined && typeof html !== 'string') return 'html must be a string when given';
  return undefined;
}
