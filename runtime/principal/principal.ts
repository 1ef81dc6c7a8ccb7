/** Who is calling. Every authenticated request carries exactly one principal. */
export type Principal =
  | {
      readonly kind: 'apiKey';
      readonly keyId: string;
      readonly environment: string;
      readonly roles: readonly string[];
      /** Key-value pairs of the key, available to role filters as `$context.<key>`. */
      readonly context: Readonly<Record<string, string>>;
    }
  | {
      readonly kind: 'management';
      /** `env` for SVCGEN_MANAGEMENT_TOKEN, otherwise the stored token's id. */
      readonly tokenId: string;
    };

/** The values role filters can refer to (`$user.id`, `$context.<key>`), per principal. */
export function principalVariables(principal: Principal): Record<string, unknown> {
  if (principal.kind === 'apiKey') {
    const vars: Record<string, unknown> = {};
    for (const [k, v] of Object.entries(principal.context)) vars[`$context.${k}`] = v;
    return vars;
  }
  return {};
}
