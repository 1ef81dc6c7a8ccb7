/**
 * How a part of the server plugs in (like a Fastify plugin, with the tRPC/Hono habit of routes as
 * plain values): a feature starts from the foundation, registers the teardown of each resource as
 * soon as it holds one, and hands back the services it adds, the credential kinds it issues and the
 * routes it serves. startServer only lists features (./features/index.ts); nothing else about a
 * feature is written in runtime/server/index.ts.
 */
import type { IncomingMessage } from 'node:http';
import type { Duplex } from 'node:stream';
import type { RequestHandler } from 'express';
import type { Handler, StreamHandler } from '../http/index.ts';
import type { CredentialResolver } from '../principal/index.ts';
import type { Foundation } from './foundation.ts';
import type { Services } from './services.ts';

export interface ServerFeature<Provides extends object = object> {
  readonly name: string;
  start(foundation: Foundation, teardown: Teardown): Promise<FeatureParts<Provides>> | FeatureParts<Provides>;
}

export interface FeatureParts<Provides extends object = object> {
  /** Long-lived parts merged into Services (one per name across all features). */
  readonly services?: Provides;
  /** Credential kinds this feature issues: the authentication stage asks them in feature order. */
  readonly resolvers?: readonly CredentialResolver[];
  /** Routes served through Express, built once every feature has started (they may use any service). */
  routes?(services: Services): readonly Route[];
  /**
   * The HTTP server's protocol upgrades (WebSocket), built with the routes: the listener answers
   * true when the request was its own (it then owns the socket).
   */
  upgrades?(services: Services): UpgradeListener;
}

export type UpgradeListener = (req: IncomingMessage, socket: Duplex, head: Buffer) => boolean;

export type Route = {
  /** `all`: every method not answered by a route registered before (e.g. a 405 with Allow). */
  readonly method: 'get' | 'post' | 'put' | 'patch' | 'delete' | 'all';
  /** The whole path, e.g. `/auth/login` or `${DATA_BASE_PATH}/_apikeys/:id`. */
  readonly path: string;
} & (
  | { readonly handler: Handler }
  /** Reads the request or writes the response as streams (file uploads and downloads). */
  | { readonly stream: StreamHandler }
  /** Express-native: for what redirects itself or serves static files (the docs page). */
  | { readonly express: RequestHandler }
);

export interface Teardown {
  /**
   * `stop` runs once when the server stops or fails to start, after everything added later has
   * stopped. `alongside`: it shares nothing with what was added before it, so it runs next to
   * those stops instead of before them (each may wait out a connect timeout on a black-holed database).
   */
  add(name: string, stop: () => unknown, options?: { alongside?: boolean }): void;
  /** Runs first when the server stops, before in-flight requests drain (e.g. /readyz turns 503). */
  onDrain(hook: () => void): void;
}

/**
 * How long stopping waits for database work (pools, the LISTEN session, the webhook runner) to let
 * go after the drain. A black-holed database makes each pending connection attempt wait out its
 * connect timeout; past this the process stops anyway, abandoning them (nothing committed is at
 * stake: every request has been answered or cut off by then).
 */
export const RELEASE_DEADLINE_MS = 4000;

/** The one teardown path: a normal close, a SIGTERM (which closes) and a failed start all end here. */
export class Lifecycle implements Teardown {
  private readonly stops: { name: string; stop: () => unknown; alongside: boolean }[] = [];
  private readonly drainHooks: (() => void)[] = [];
  private stopping: Promise<'released' | 'abandoned'> | undefined;

  constructor(private readonly onError: (name: string, error: unknown) => void) {}

  add(name: string, stop: () => unknown, options: { alongside?: boolean } = {}): void {
    this.stops.push({ name, stop, alongside: options.alongside ?? false });
  }

  onDrain(hook: () => void): void {
    this.drainHooks.push(hook);
  }

  /**
   * Drain hooks, then `drain` (the HTTP server's, when it listens), then every stop once, latest
   * first, within RELEASE_DEADLINE_MS. A stop that fails is reported and the others still run.
   * Calling it again returns the first call's outcome.
   */
  stop(drain?: () => Promise<void>): Promise<'released' | 'abandoned'> {
    return (this.stopping ??= this.run(drain));
  }

  private async run(drain: (() => Promise<void>) | undefined): Promise<'released' | 'abandoned'> {
    for (const hook of this.drainHooks) this.guard('drain', hook);
    await drain?.().catch((error: unknown) => this.onError('http', error));
    let deadline: NodeJS.Timeout | undefined;
    const abandoned = new Promise<'abandoned'>((resolve) => {
      deadline = setTimeout(() => resolve('abandoned'), RELEASE_DEADLINE_MS);
      deadline.unref();
    });
    return Promise.race([this.release().then(() => 'released' as const), abandoned]).finally(() =>
      clearTimeout(deadline),
    );
  }

  private async release(): Promise<void> {
    const beside: Promise<void>[] = [];
    for (const { name, stop, alongside } of [...this.stops].reverse()) {
      const done = this.guard(name, stop);
      if (alongside) beside.push(done);
      else await done;
    }
    await Promise.all(beside);
  }

  private async guard(name: string, stop: () => unknown): Promise<void> {
    try {
      await stop();
    } catch (error) {
      this.onError(name, error);
    }
  }
}
