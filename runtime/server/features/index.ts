/**
 * The one place server features are registered. They start in this order and stop in the reverse
 * one; the authentication stage asks their credential kinds in this order too.
 */
import type { Foundation } from '../foundation.ts';
import type { Route, ServerFeature, Teardown, UpgradeListener } from '../feature.ts';
import type { Services } from '../services.ts';
import { authFeature } from './auth.ts';
import { codeFeature } from './code.ts';
import { dataFeature } from './data.ts';
import { docsFeature } from './docs.ts';
import { functionsFeature } from './functions.ts';
import { graphqlFeature } from './graphql.ts';
import { graphqlPlaygroundFeature } from './graphql-playground.ts';
import { keysFeature } from './keys.ts';
import { observabilityFeature } from './observability.ts';
import { realtimeFeature } from './realtime.ts';
import { storageFeature } from './storage.ts';
import { webhooksFeature } from './webhooks.ts';

export const FEATURES = [
  authFeature,
  keysFeature,
  dataFeature,
  codeFeature,
  functionsFeature,
  // Before graphql: a browser's GET of the endpoint is the playground's (features/graphql-playground.ts).
  graphqlPlaygroundFeature,
  graphqlFeature,
  realtimeFeature,
  webhooksFeature,
  storageFeature,
  observabilityFeature,
  docsFeature,
] as const;

type Provided<F> = F extends ServerFeature<infer P> ? P : never;
type Intersection<U> = (U extends unknown ? (u: U) => void : never) extends (i: infer I) => void ? I : never;
type Assert<T extends true> = T;
/** Fails to compile when a member of Services is provided by neither the foundation nor a feature. */
export type EveryServiceProvided = Assert<
  Foundation & Intersection<Provided<(typeof FEATURES)[number]>> & Pick<Services, 'resolvers'> extends Services
    ? true
    : false
>;

/** Starts every feature; their services merged into one object, and the routes they serve. */
export async function startFeatures(
  foundation: Foundation,
  teardown: Teardown,
): Promise<{ services: Services; routes: Route[]; upgrades: UpgradeListener[] }> {
  const parts = [];
  for (const feature of FEATURES) parts.push(await feature.start(foundation, teardown));
  const services: Services = Object.assign({}, foundation, ...parts.map((p) => p.services), {
    resolvers: parts.flatMap((p) => p.resolvers ?? []),
  });
  return {
    services,
    routes: parts.flatMap((p) => p.routes?.(services) ?? []),
    upgrades: parts.flatMap((p) => (p.upgrades ? [p.upgrades(services)] : [])),
  };
}
