/**
 * The request bodies of /_webhooks (docs/api.md §8.1) and the shapes of its answers: the runtime
 * validates the bodies and types its answers with these, OpenAPI is derived from them. What the schema cannot check (the table and fields exist, the URL's target
 * is allowed) runtime/webhooks checks after it.
 */
import { z } from 'zod';
import { dateTimeText } from './formats.ts';

export const EVENT_NAMES = ['INSERT', 'UPDATE', 'DELETE'] as const;

const filterValue = z.union([z.string(), z.number(), z.boolean(), z.null()]);

/**
 * zod's record skips a `__proto__` key (JSON.parse makes it an own property), which would store
 * `{}` and fire on every event: refuse it as a field the table does not have (docs/api.md §8.1).
 * Other names (`constructor`, `toString`) reach checkSubscription and fail there like any unknown field.
 */
function refuseProtoKey(value: unknown, ctx: z.RefinementCtx): unknown {
  if (typeof value === 'object' && value !== null && !Array.isArray(value) && Object.hasOwn(value, '__proto__')) {
    ctx.addIssue({
      code: 'custom',
      path: ['__proto__'],
      message: 'no table has a field "__proto__"',
      params: { rule: 'exists' },
      input: value,
    });
  }
  return value;
}

/** Every field a subscription has; create requires the first six, PATCH takes any subset. */
export const subscriptionFields = z
  .object({
    projectId: z.string().min(1).meta({ description: 'must equal X-Project-Id' }),
    environment: z.string().min(1).meta({ description: 'must equal the environment header' }),
    table: z.string().min(1),
    events: z
      .array(z.enum(EVENT_NAMES, { error: 'each event must be INSERT, UPDATE or DELETE' }))
      .min(1, 'events must name at least one of INSERT, UPDATE, DELETE')
      .refine((events) => new Set(events).size === events.length, 'events must not repeat')
      .meta({ uniqueItems: true }),
    url: z.string().min(1).max(2048).meta({
      format: 'uri',
      description: 'https (http only with webhooks.allowHttp); not a loopback, private, link-local or metadata address',
    }),
    secret: z
      .string()
      .min(1, 'secret must not be empty')
      .max(1024)
      .meta({ writeOnly: true, description: 'HMAC-SHA256 key of the delivery signatures; never returned' }),
    active: z.boolean().meta({ description: 'false pauses delivery' }),
    filter: z
      .preprocess(refuseProtoKey, z.record(z.string(), filterValue))
      .nullable()
      .meta({ description: 'field → value; only records whose fields all equal these values are delivered' }),
    select: z
      .array(z.string())
      .min(1, 'select must name at least one field (leave it out for every field)')
      .refine((fields) => new Set(fields).size === fields.length, 'select must not repeat a field')
      .meta({ uniqueItems: true })
      .nullable()
      .meta({ description: 'fields kept in record and data' }),
  })
  .strict();

/** What create stores for a field left out (the schema leaves them out: the store fills them in). */
export const SUBSCRIPTION_DEFAULTS = { active: true, filter: null, select: null } as const;

export const newSubscriptionBody = subscriptionFields
  .extend({ active: subscriptionFields.shape.active.meta({ default: SUBSCRIPTION_DEFAULTS.active }) })
  .partial({ active: true, filter: true, select: true })
  .required({ projectId: true, environment: true, table: true, events: true, url: true, secret: true });

export const subscriptionPatchBody = subscriptionFields.partial();

/** A subscription as answered: every field but the secret. */
export const webhookSubscription = z.object({
  id: z.string().regex(/^wh_/),
  ...subscriptionFields.omit({ secret: true }).shape,
  createdAt: dateTimeText,
  updatedAt: dateTimeText,
});

export const DELIVERY_STATUSES = ['pending', 'delivered', 'retrying', 'deferred', 'dead_letter'] as const;

export const webhookDelivery = z.object({
  id: z.string().regex(/^del_/),
  eventId: z.string().regex(/^evt_/),
  event: z.enum(EVENT_NAMES),
  status: z.enum(DELIVERY_STATUSES),
  httpStatus: z.int().nullable().meta({ description: 'status of the last answer' }),
  attempts: z.int(),
  lastError: z.string().nullable(),
  nextAttemptAt: dateTimeText.nullable().meta({ description: 'while the delivery waits' }),
  createdAt: dateTimeText,
  updatedAt: dateTimeText,
});
