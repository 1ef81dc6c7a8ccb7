/**
 * Rules the runtime adds to a wire schema from its config (the password rule, the roles open to
 * signup): the schema states the field once, the runtime hands it the check. The OpenAPI document
 * is derived without them and says the rule in the field's description instead.
 */
import type { z } from 'zod';

/** What is wrong with a value, each broken rule on its own (so every one is reported at once). */
export type FieldRule = (value: string, field: string) => readonly { rule: string; message: string }[];

/** `schema` checked by `rule` as the field `field`; each violation an issue carrying its rule name. */
export function ruled(schema: z.ZodString, field: string, rule: FieldRule | undefined): z.ZodString {
  if (!rule) return schema;
  return schema.superRefine((value, ctx) => {
    for (const v of rule(value, field)) ctx.addIssue({ code: 'custom', message: v.message, params: { rule: v.rule } });
  });
}
