/**
 * The transport for development and tests, where there is no SMTP server: each message becomes
 * one JSON line in a file and on stdout, so a developer or a test can pick up the code it carries.
 */
import { appendFile, mkdir } from 'node:fs/promises';
import path from 'node:path';
import type { MailMessage, Mailer } from './mailer.ts';

export interface DevMailerOptions {
  from: string;
  logFile: string;
  stdout: (line: string) => void;
  log: (message: string) => void;
}

export class DevMailer implements Mailer {
  readonly #options: DevMailerOptions;
  /** One chain keeps the lines in send order and gives idle() a single thing to wait on. */
  #tail: Promise<void> = Promise.resolve();
  #closed = false;

  constructor(options: DevMailerOptions) {
    this.#options = options;
  }

  send(message: MailMessage): void {
    if (this.#closed) {
      this.#options.log(`mail to ${message.to} dropped: the mailer is closed`);
      return;
    }
    const line = renderLine(this.#options.from, message);
    this.#tail = this.#tail.then(() => this.#write(line, message.to));
  }

  idle(): Promise<void> {
    return this.#tail;
  }

  close(): Promise<void> {
    this.#closed = true;
    return this.#tail;
  }

  /** Never rejects, so one failed write cannot break the chain for the messages after it. */
  async #write(line: string, to: string): Promise<void> {
    const { logFile, stdout, log } = this.#options;
    try {
      // stdout first: if the file is not writable the line is at least on the console
      stdout(line);
      // every time rather than once, so deleting the folder while the server runs is harmless
      await mkdir(path.dirname(logFile), { recursive: true });
      await appendFile(logFile, line);
    } catch (error) {
      log(
        `mail to ${to} could not be written to ${logFile}: ${error instanceof Error ? error.message : String(error)}`,
      );
    }
  }
}

/** `{"time","from","to","subject","text","html"?,...meta}` and a newline. */
function renderLine(from: string, message: MailMessage): string {
  const fields = {
    time: new Date().toISOString(),
    from,
    to: message.to,
    subject: message.subject,
    text: message.text,
    ...(message.html !== undefined ? { html: message.html } : {}),
  };
  // Spreading the fields again keeps their key order first but lets no meta key overwrite them.
  return `${JSON.stringify({ ...fields, ...message.meta, ...fields })}\n`;
}
