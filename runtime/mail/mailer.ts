/**
 * Outgoing mail for user authentication (signup confirmation and password recovery codes).
 * A request handler only queues a message: delivery, retries and SMTP trouble stay in the
 * background, so a slow or broken mail server can neither delay nor fail the request.
 */
import { DevMailer } from './dev-mailer.ts';
import { SmtpMailer } from './smtp-mailer.ts';

export interface MailMessage {
  to: string;
  subject: string;
  /** Plain text body. */
  text: string;
  /** An HTML alternative to `text` (a project's auth.mail hook may render one). */
  html?: string;
  /** machine-readable extras, e.g. { kind: 'confirm-signup', code: '123456' } */
  meta?: Record<string, string>;
}

export interface Mailer {
  /** Queues the message and returns at once; never throws, never waits on SMTP. */
  send(message: MailMessage): void;
  /** Resolves when every queued message was sent or given up on (tests and shutdown). */
  idle(): Promise<void>;
  /** Stops retry timers after trying to flush (bounded wait, e.g. 5 s), closes the SMTP transport. */
  close(): Promise<void>;
}

export interface MailerOptions {
  /**
   * smtp:// or smtps:// URL (nodemailer's URL form, e.g. smtp://user:pass@host:2525); query
   * parameters such as ?socketTimeout=30000 override the transport's defaults. Undefined or
   * empty → the dev transport.
   */
  smtpUrl?: string;
  from: string;
  /** Dev transport: the file that gets one JSON object per line (create its folder if missing). */
  logFile: string;
  /** Dev transport also writes each JSON line, newline included, to this sink (default: process.stdout.write). */
  stdout?: (line: string) => void;
  /** Where problems are reported (SMTP failures, retries, give-ups). */
  log: (message: string) => void;
  /** Delays between SMTP attempts in ms; default [1000, 5000, 30000, 120000, 600000]. */
  retryDelaysMs?: number[];
}

/** About 13 minutes in all: enough to ride out a mail server restart, short enough that a code is still useful. */
const DEFAULT_RETRY_DELAYS_MS = [1_000, 5_000, 30_000, 120_000, 600_000];

/** Throws only for an smtpUrl that is not smtp:// or smtps://, so a bad config fails at startup. */
export function createMailer(options: MailerOptions): Mailer {
  const { smtpUrl, from, log } = options;
  if (!smtpUrl) {
    const stdout = options.stdout ?? ((line: string) => void process.stdout.write(line));
    return new DevMailer({ from, log, stdout, logFile: options.logFile });
  }
  return new SmtpMailer({ url: smtpUrl, from, log, retryDelaysMs: options.retryDelaysMs ?? DEFAULT_RETRY_DELAYS_MS });
}
