/** /auth: users, sessions and their tokens (docs/api.md §3); user access tokens as credentials. */
import path from 'node:path';
import { authHandlers, authRoutes, UserAuth } from '../../auth/index.ts';
import { clientAddress } from '../../http/index.ts';
import { createMailer, type Mailer } from '../../mail/index.ts';
import type { ServerFeature } from '../feature.ts';
import { every } from '../housekeeping.ts';

export const authFeature: ServerFeature<{ auth: UserAuth; mailer: Mailer }> = {
  name: 'auth',
  async start({ options, config, db, channel, box, rateLimiter, log, code }, teardown) {
    const mailer =
      options.mailer ??
      createMailer({
        smtpUrl: options.smtpUrl ?? config.mail.smtpUrl,
        from: config.mail.from,
        logFile: path.join(options.projectDir, '.svcgen', 'mail.log'),
        log,
      });
    teardown.add('mailer', () => mailer.close());
    const auth = await UserAuth.start({
      config,
      db,
      channel,
      box,
      mailer,
      rateLimiter,
      clientIp: clientAddress(config.trustProxy),
      log,
      code,
      passwordCost: options.passwordCost,
      onPasswordJob: options.onPasswordJob,
    });
    teardown.add('auth', () => auth.stop());
    // Expired codes, lockouts and sessions, off the request path.
    teardown.add(
      'auth housekeeping',
      every(() => auth.prune()),
    );
    return {
      services: { auth, mailer },
      resolvers: [auth],
      routes: (services) => {
        // The contexts of afterSignUp and afterConfirm act through the code feature's services.
        auth.hooks.wire({ codeServices: services.codeServices, policy: services.policy });
        return authRoutes(authHandlers(auth));
      },
    };
  },
};
