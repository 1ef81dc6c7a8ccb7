// Fixtures for the database-free unit tests of runtime/query (test/query-*.unit.test.ts): the shop
// example's tables as a Catalog, policies from roles objects, principals and statement scopes.
// Nothing here opens a connection.
import fs from 'node:fs';
import { City } from '../../examples/shop/generated/tables/City.ts';
import { Customer } from '../../examples/shop/generated/tables/Customer.ts';
import { Order } from '../../examples/shop/generated/tables/Order.ts';
import { OrderItem } from '../../examples/shop/generated/tables/OrderItem.ts';
import { Product } from '../../examples/shop/generated/tables/Product.ts';
import { parseConfig, type Config } from '../../runtime/config/index.ts';
import type { ApiKeyPrincipal, ManagementPrincipal, UserPrincipal } from '../../runtime/principal/index.ts';
import {
  Catalog,
  Params,
  Policy,
  roleOperand,
  type Access,
  type Condition,
  type Operator,
  type Scope,
} from '../../runtime/query/index.ts';

export const catalog = new Catalog({ City, Customer, Order, OrderItem, Product });
export const table = (name: string) => catalog.require(name);

export type Roles = Config['roles'];

/** A roles object as svcgen.config.json writes it, through the real config schema (defaults filled in). */
export function roles(raw: Record<string, unknown>): Roles {
  return parseConfig({ project: { id: 'unit' }, environments: ['master'], roles: raw }, 'unit.json').roles;
}

/** The example's own roles (admin, customer, catalog). */
export const SHOP_ROLES: Roles = parseConfig(
  JSON.parse(fs.readFileSync(new URL('../../examples/shop/svcgen.config.json', import.meta.url), 'utf8')),
  'svcgen.config.json',
).roles;

/** A Policy wired as the server wires it (runtime/server/features/data.ts). */
export function policyOf(r: Roles): Policy {
  return new Policy(
    r,
    (t, path, op, value) => roleOperand(catalog, t, path, op, value),
    (t) => catalog.get(t)?.spec.fields.map((f) => f.name) ?? [],
  );
}

export const USER_ID = '8d5e2c1a-3b4f-4c6d-9e7f-0a1b2c3d4e5f';
export const USER_EMAIL = 'carol@example.com';

export function user(roleNames: readonly string[], userId = USER_ID, email = USER_EMAIL): UserPrincipal {
  return { kind: 'user', userId, email, environment: 'master', roles: roleNames, sessionId: 's1', tokenId: 'j1' };
}

export function apiKey(roleNames: readonly string[], context: Record<string, string> = {}): ApiKeyPrincipal {
  return { kind: 'apiKey', keyId: 'key_1', environment: 'master', roles: roleNames, context };
}

export const management: ManagementPrincipal = { kind: 'management', tokenId: 'env' };

export function scopeOf(access: Access): Scope {
  return { catalog, environment: 'master', params: new Params(), nextAlias: { n: 0 }, access };
}

/** `path` is `a.b.field`. */
export function cmp(path: string, op: Operator, value: unknown): Condition {
  return { kind: 'compare', path: path.split('.'), op, value };
}

export const TRUE: Condition = { kind: 'true' };
export const FALSE: Condition = { kind: 'false' };
