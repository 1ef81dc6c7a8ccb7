/**
 * CORS for browser apps calling /auth and the data API (`cors.origins`, `cors.credentials`).
 * The `cors` package does the header work; requests without an Origin header skip it entirely.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import cors from 'cors';

/** Headers a browser script may read from our responses. */
const EXPOSED = [
  'Location',
  'Retry-After',
  'RateLimit-Limit',
  'RateLimit-Remaining',
  'RateLimit-Reset',
  'Idempotency-Replayed',
  'Preference-Applied',
];

/** Applies CORS headers; returns true when the request was a preflight and has been answered. */
export type CorsStage = (req: IncomingMessage, res: ServerResponse) => boolean;

export function corsStage(options: { origins: readonly string[]; credentials: boolean }): CorsStage | undefined {
  if (options.origins.length === 0) return undefined;
  const middleware = cors({
    origin: options.origins.includes('*') ? '*' : [...options.origins],
    credentials: options.credentials,
    methods: ['GET', 'POST', 'PUT', 'PATCH', 'DELETE', 'OPTIONS'], // PUT: endpoints of user code (docs/own-code.md)
    exposedHeaders: EXPOSED,
    maxAge: 600,
  });
  return (req, res) => {
    if (req.headers.origin === undefined) return false;
    let passed = false;
    // The middleware answers preflights itself and calls next() for everything else, synchronously.
    middleware(req, res, () => {
      passed = true;
    });
    return !passed;
  };
}
