/**
 * User authentication for one project: the long-lived parts (keys per environment, the password
 * hasher, the mailer, token verification and revocation) built once at server start, and the
 * resolver that lets the data pipeline accept user access tokens.
 */
import type { Config } from '../config/index.ts';
import type { Database, NotificationChannel } from '../db/index.ts';
import type { ApiRequest } from '../http/index.ts';
import { CodeRegistry } from '../usercode/index.ts';
import type { Mailer } from '../mail/index.ts';
import { unauthorized, type Credential, type CredentialResolver, type Principal } from '../principal/index.ts';
import type { SharedRateLimiter } from '../rate-limit/index.ts';
import { serverSecret, type SecretBox } from '../secrets/index.ts';
import type { Tenant } from '../tenancy/index.ts';
import { AuthCodeHooks } from './code-hooks.ts';
import { Codes } from './codes.ts';
import { Lockout } from './lockout.ts';
import { createPasswordHasher, type PasswordHasher } from './passwords/index.ts';
import { authEnabledIn } from './requests.ts';
import {
  AccessTokenVerifier,
  audience,
  issueAccessToken,
  loadEnvironmentKeys,
  looksLikeJwt,
  Revocations,
  TokenRejected,
  type EnvironmentKeys,
} from './tokens/index.ts';

export interface UserAuthOptions {
  config: Config;
  db: Database;
  channel: NotificationChannel;
  box: SecretBox;
  mailer: Mailer;
  rateLimiter: SharedRateLimiter;
  /** The client address of a request, honouring `trustProxy`. */
  clientIp: (req: ApiRequest) => string;
  log: (message: string) => void;
  /** The project's own code: its auth hooks (docs/own-code.md "Auth hooks"); none: the empty registry. */
  code?: CodeRegistry;
  /** bcrypt cost (default 10; tests may lower it). */
  passwordCost?: number;
  /** Sees each bcrypt job (tests count them; PasswordHasherOptions.onJob). */
  onPasswordJob?: (op: 'hash' | 'verify') => void;
}

export class UserAuth implements CredentialResolver {
  readonly config: Config;
  readonly db: Database;
  readonly mailer: Mailer;
  readonly rateLimiter: SharedRateLimiter;
  readonly clientIp: UserAuthOptions['clientIp'];
  readonly log: (message: string) => void;
  readonly passwords: PasswordHasher;
  readonly revocations: Revocations;
  readonly verifier: AccessTokenVerifier;
  /** The project's auth hooks; every mail of the auth surface goes through `hooks.send`. */
  readonly hooks: AuthCodeHooks;
  private constructor(
    options: UserAuthOptions,
    readonly keys: ReadonlyMap<string, EnvironmentKeys>,
    readonly codes: Codes,
    readonly lockout: Lockout,
  ) {
    this.config = options.config;
    this.db = options.db;
    this.mailer = options.mailer;
    this.rateLimiter = options.rateLimiter;
    this.clientIp = options.clientIp;
    this.log = options.log;
    this.passwords = createPasswordHasher({ cost: options.passwordCost, onJob: options.onPasswordJob });
    this.revocations = new Revocations(options.db, options.channel, options.config.auth.accessTokenTtl * 1000);
    this.verifier = new AccessTokenVerifier(options.config.project.id, keys, this.revocations, options.channel);
    this.hooks = new AuthCodeHooks(
      options.code ?? CodeRegistry.EMPTY,
      options.config.code.hookTimeoutMs,
      options.mailer,
      options.log,
    );
    this.revocations.start();
  }

  /** Loads (or makes, on first start) the keys of every environment where auth is enabled. */
  static async start(options: UserAuthOptions): Promise<UserAuth> {
    const { config } = options;
    const keys = new Map<string, EnvironmentKeys>();
    for (const environment of config.environments) {
      if (!authEnabledIn(config, environment)) continue;
      keys.set(
        environment,
        await loadEnvironmentKeys(options.db, options.box, config.project.id, environment, config.auth.jwe),
      );
    }
    const { codeTtl, codeMaxAttempts, codeMaxFailuresPerAccount, lockout: locks } = config.auth;
    const codes = new Codes(
      await serverSecret(options.db, 'auth-codes'),
      codeTtl,
      codeMaxAttempts,
      codeMaxFailuresPerAccount,
    );
    // Its own secret: the keyed hashes of e-mails without an account (never the addresses).
    const lockout = new Lockout(
      await serverSecret(options.db, 'auth-login-failures'),
      locks.maxFailedAttempts,
      locks.duration,
    );
    return new UserAuth(options, keys, codes, lockout);
  }

  async stop(): Promise<void> {
    this.revocations.stop();
    await this.hooks.idle();
    await this.passwords.close();
  }

  /**
   * Drops what can no longer matter (off the request path): expired denylist entries, refresh
   * tokens and codes, lapsed locks of e-mails without an account, passed code-failure windows.
   */
  async prune(): Promise<void> {
    await Promise.allSettled([
      this.db.exec(
        `DELETE FROM svcgen.revoked_tokens WHERE expires_at < now();
         DELETE FROM svcgen.refresh_tokens WHERE expires_at < now();
         DELETE FROM svcgen.auth_codes WHERE expires_at < now();`,
      ),
      this.lockout.prune(this.db),
      this.codes.prune(this.db),
    ]);
  }

  environmentKeys(environment: string): EnvironmentKeys {
    const keys = this.keys.get(environment);
    if (!keys) throw new Error(`auth is not enabled in environment "${environment}"`);
    return keys;
  }

  /**
   * An access token for the session, with the extra claims of the project's auth.claims hook
   * (docs/own-code.md "Auth hooks"); `extra` when the caller asked the hook already (before it
   * started the session, so that a failing hook leaves none behind).
   */
  async issueAccessToken(
    tenant: Tenant,
    user: { id: string; email: string; roles: readonly string[] },
    sessionId: string,
    extra?: Record<string, unknown>,
    req?: ApiRequest,
  ): Promise<string> {
    const keys = this.environmentKeys(tenant.environment);
    const claims = extra ?? (await this.hooks.claims(req, tenant, user));
    const { token } = await issueAccessToken(
      keys,
      audience(tenant.projectId, tenant.environment),
      this.config.auth.accessTokenTtl,
      user,
      sessionId,
      claims,
    );
    return token;
  }

  /** The data pipeline's resolver for `Bearer <access token>`: JWS or JWE, verified and not revoked. */
  resolve(credential: Credential, tenant: Tenant): Promise<Principal> | undefined {
    // Not a token of this kind: the next resolver is asked at once (an API key request takes no promise here).
    if (!credential.bearer || !looksLikeJwt(credential.token)) return undefined;
    return this.verifiedPrincipal(credential.token, tenant);
  }

  private async verifiedPrincipal(token: string, tenant: Tenant): Promise<Principal> {
    try {
      return (await this.verifier.verify(token, tenant.environment)).principal;
    } catch (error) {
      if (!(error instanceof TokenRejected)) throw error;
      throw unauthorized(
        error.reason === 'expired'
          ? 'the access token has expired; get a new one with POST /auth/refresh-token'
          : 'the access token is not valid: malformed, tampered with, revoked, or issued for another project or environment',
      );
    }
  }
}
