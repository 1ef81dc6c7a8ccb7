/**
 * Delivery through an SMTP server, off the request path: send() only queues, a few deliveries
 * run at a time, and a failed one waits on its own unref'd timer, so a slow or broken server
 * costs neither the caller nor a clean process exit.
 */
import { createTransport, type NodemailerError } from 'nodemailer';
import type { MailMessage, Mailer } from './mailer.ts';

export interface SmtpMailerOptions {
  url: string;
  from: string;
  log: (message: string) => void;
  retryDelaysMs: number[];
}

/** Auth mail comes in trickles; more connections would only invite a provider's rate limits. */
const MAX_IN_FLIGHT = 4;
/** nodemailer waits minutes by default, long enough for a hung server to hold every slot. */
const TIMEOUTS_MS = { connectionTimeout: 10_000, greetingTimeout: 10_000, socketTimeout: 10_000, dnsTimeout: 10_000 };
/** Shutdown should not hang on a dead server; whatever is not sent by then is given up. */
const FLUSH_TIMEOUT_MS = 5_000;

interface Job {
  message: MailMessage;
  failures: number;
}

export class SmtpMailer implements Mailer {
  readonly #options: SmtpMailerOptions;
  readonly #transport: ReturnType<typeof createSmtpTransport>;
  readonly #ready: Job[] = [];
  readonly #waiting = new Map<NodeJS.Timeout, Job>();
  /** Cuts off the deliveries still running when the flush at close() runs out of time. */
  readonly #abort = new AbortController();
  #inFlight = 0;
  #idleWaiters: (() => void)[] = [];
  #closing?: Promise<void>;

  constructor(options: SmtpMailerOptions) {
    this.#options = options;
    this.#transport = createSmtpTransport(options.url);
  }

  send(message: MailMessage): void {
    if (this.#closing) {
      this.#options.log(`mail to ${message.to} dropped: the mailer is closed`);
      return;
    }
    this.#ready.push({ message, failures: 0 });
    this.#pump();
  }

  idle(): Promise<void> {
    if (this.#pending() === 0) return Promise.resolve();
    return new Promise((resolve) => this.#idleWaiters.push(resolve));
  }

  close(): Promise<void> {
    this.#closing ??= this.#shutDown();
    return this.#closing;
  }

  async #shutDown(): Promise<void> {
    this.#retryWaitingNow();
    await settledWithin(this.idle(), FLUSH_TIMEOUT_MS);
    this.#abort.abort();
    await this.idle();
    this.#transport.close();
  }

  /** A message waiting out a long delay (up to minutes) gets its last attempt now instead of none. */
  #retryWaitingNow(): void {
    for (const [timer, job] of this.#waiting) {
      clearTimeout(timer);
      this.#ready.push(job);
    }
    this.#waiting.clear();
    this.#pump();
  }

  #pump(): void {
    while (this.#inFlight < MAX_IN_FLIGHT && this.#ready.length > 0) {
      this.#inFlight++;
      void this.#deliver(this.#ready.shift()!);
    }
  }

  /** Never rejects: an async function also turns a synchronous throw of sendMail into a failure. */
  async #deliver(job: Job): Promise<void> {
    const { to, subject, text, html } = job.message;
    try {
      await this.#transport.sendMail({
        from: this.#options.from,
        to,
        subject,
        text,
        ...(html !== undefined ? { html } : {}),
        signal: this.#abort.signal,
      });
    } catch (error) {
      this.#fail(job, error);
    } finally {
      this.#inFlight--;
      this.#pump();
      this.#notifyIfIdle();
    }
  }

  #fail(job: Job, error: unknown): void {
    job.failures++;
    const failed = `mail to ${job.message.to} failed (attempt ${job.failures}): ${errorMessage(error)}`;
    // a 5xx reply (unknown mailbox, refused sender) would only be refused again
    const delay = this.#closing || isPermanent(error) ? undefined : this.#options.retryDelaysMs[job.failures - 1];
    if (delay === undefined) {
      const why = this.#closing ? ' (mailer closing)' : isPermanent(error) ? ' (permanent rejection)' : '';
      this.#options.log(`${failed}; giving up${why}`);
      return;
    }
    this.#options.log(`${failed}; retrying in ${delay} ms`);
    this.#retryLater(job, delay);
  }

  #retryLater(job: Job, delay: number): void {
    const timer = setTimeout(() => {
      this.#waiting.delete(timer);
      this.#ready.push(job);
      this.#pump();
    }, delay);
    timer.unref();
    this.#waiting.set(timer, job);
  }

  #pending(): number {
    return this.#ready.length + this.#inFlight + this.#waiting.size;
  }

  #notifyIfIdle(): void {
    if (this.#pending() > 0) return;
    for (const resolve of this.#idleWaiters.splice(0)) resolve();
  }
}

/** Throws before any secret in the URL could reach a log, and without quoting it. */
function createSmtpTransport(url: string) {
  if (!/^smtps?:\/\//i.test(url)) throw new Error('mail: smtpUrl must be an smtp:// or smtps:// URL');
  // nodemailer lets query parameters of the URL win over the other keys, so an operator can still tune these
  return createTransport({ ...TIMEOUTS_MS, url });
}

function isPermanent(error: unknown): boolean {
  return (error as NodemailerError | undefined)?.permanent === true;
}

function errorMessage(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}

/** Waits for `promise` at most `ms`, without a timer left behind to hold the process open. */
async function settledWithin(promise: Promise<void>, ms: number): Promise<void> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<void>((resolve) => (timer = setTimeout(resolve, ms)));
  await Promise.race([promise, timeout]);
  clearTimeout(timer);
}
