// The mail subsystem (runtime/mail): the dev transport's JSON lines, and SMTP delivery against a
// real smtp-server on 127.0.0.1 that can refuse messages, to see retries, give-ups and shutdown.
import fs from 'node:fs';
import net, { type AddressInfo } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { SMTPServer } from 'smtp-server';
import { describe, expect, it, onTestFinished } from 'vitest';
import { createMailer, type MailMessage, type Mailer, type MailerOptions } from '../../runtime/mail/index.ts';

const FROM = 'svcgen <noreply@example.com>';
const SIGNUP: MailMessage = {
  to: 'alice@example.com',
  subject: 'Confirm your signup',
  text: 'Your code is 123456',
  meta: { kind: 'confirm-signup', code: '123456' },
};

/** A log sink whose lines a test can wait for instead of sleeping. */
function recordLog() {
  const lines: string[] = [];
  const waiters: (() => void)[] = [];
  return {
    lines,
    log(line: string) {
      lines.push(line);
      for (const wake of waiters.splice(0)) wake();
    },
    async until(text: string): Promise<void> {
      while (!lines.some((line) => line.includes(text))) await new Promise<void>((wake) => waiters.push(wake));
    },
  };
}

function mailer(options: Partial<MailerOptions> & Pick<MailerOptions, 'log'>): Mailer {
  const created = createMailer({ from: FROM, logFile: path.join(os.tmpdir(), 'svcgen-mail-unused.jsonl'), ...options });
  onTestFinished(() => created.close());
  return created;
}

/** `verdict(n)` decides the n-th DATA (1-based): an Error refuses it (450 unless it has a responseCode). */
async function startSmtpServer(verdict: (attempt: number) => Error | undefined = () => undefined) {
  let attempts = 0;
  let deliver!: (raw: string) => void;
  const delivered = new Promise<string>((resolve) => (deliver = resolve));
  const server = new SMTPServer({
    authOptional: true,
    disabledCommands: ['STARTTLS'],
    logger: false,
    onData(stream, _session, callback) {
      const chunks: Buffer[] = [];
      stream.on('data', (chunk: Buffer) => chunks.push(chunk));
      stream.on('end', () => {
        const refusal = verdict(++attempts);
        if (!refusal) deliver(Buffer.concat(chunks).toString('utf8'));
        callback(refusal);
      });
    },
  });
  const listener = await new Promise<net.Server>((resolve) => {
    const started: net.Server = server.listen(0, '127.0.0.1', () => resolve(started));
  });
  onTestFinished(() => new Promise<void>((resolve) => server.close(resolve)));
  const { port } = listener.address() as AddressInfo;
  return { url: `smtp://127.0.0.1:${port}`, delivered, attempts: () => attempts };
}

/** A port nothing listens on: bound by the OS, then released. */
async function closedPort(): Promise<number> {
  const probe = net.createServer();
  await new Promise<void>((resolve) => probe.listen(0, '127.0.0.1', resolve));
  const { port } = probe.address() as AddressInfo;
  await new Promise<void>((resolve) => probe.close(() => resolve()));
  return port;
}

describe('dev transport', () => {
  it('appends one JSON line per message to the log file (creating its folder) and to the stdout sink', async () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'svcgen-mail-'));
    onTestFinished(() => fs.rmSync(dir, { recursive: true, force: true }));
    const logFile = path.join(dir, 'nested', 'mail.jsonl');
    const printed: string[] = [];
    const log = recordLog();
    const dev = mailer({ logFile, stdout: (line) => printed.push(line), log: log.log });

    dev.send(SIGNUP);
    dev.send({
      to: 'bob@example.com',
      subject: 'Reset your password',
      text: 'Your code is 654321',
      meta: { kind: 'recover-password', code: '654321' },
    });
    await dev.idle();

    const content = fs.readFileSync(logFile, 'utf8');
    expect(printed.join('')).toBe(content);
    const lines = content.split('\n');
    expect(lines.pop()).toBe('');
    const [first, second] = lines.map((line) => JSON.parse(line));
    expect(first).toEqual({
      time: expect.any(String),
      from: FROM,
      to: 'alice@example.com',
      subject: 'Confirm your signup',
      text: 'Your code is 123456',
      kind: 'confirm-signup',
      code: '123456',
    });
    expect(new Date(first.time).toISOString()).toBe(first.time);
    expect(second).toMatchObject({
      to: 'bob@example.com',
      subject: 'Reset your password',
      kind: 'recover-password',
      code: '654321',
    });
    expect(log.lines).toEqual([]);
  });

  it('does not let meta overwrite the envelope fields', async () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'svcgen-mail-'));
    onTestFinished(() => fs.rmSync(dir, { recursive: true, force: true }));
    const printed: string[] = [];
    const dev = mailer({
      logFile: path.join(dir, 'mail.jsonl'),
      stdout: (line) => printed.push(line),
      log: recordLog().log,
    });

    dev.send({ ...SIGNUP, meta: { to: 'mallory@example.com', code: '1' } });
    await dev.idle();

    expect(JSON.parse(printed[0]!)).toMatchObject({ to: 'alice@example.com', code: '1' });
  });
});

describe('SMTP transport', () => {
  it('delivers a message to the SMTP server', async () => {
    const server = await startSmtpServer();
    const log = recordLog();
    mailer({ smtpUrl: server.url, log: log.log }).send(SIGNUP);

    const raw = await server.delivered;
    expect(raw).toContain('Subject: Confirm your signup');
    expect(raw).toContain('To: alice@example.com');
    expect(raw).toContain('From: svcgen <noreply@example.com>');
    expect(raw).toContain('Your code is 123456');
    expect(log.lines).toEqual([]);
  });

  it('retries after the server refuses the message once', async () => {
    const server = await startSmtpServer((attempt) => (attempt === 1 ? new Error('try later') : undefined));
    const log = recordLog();
    const smtp = mailer({ smtpUrl: server.url, log: log.log, retryDelaysMs: [50, 50] });

    expect(smtp.send(SIGNUP)).toBeUndefined();
    expect(server.attempts()).toBe(0);

    expect(await server.delivered).toContain('Your code is 123456');
    await smtp.idle();
    expect(server.attempts()).toBe(2);
    expect(log.lines).toEqual([
      expect.stringMatching(/^mail to alice@example.com failed \(attempt 1\): .*try later.*; retrying in 50 ms$/),
    ]);
  });

  it('gives up after the last delay when nothing listens on the port', async () => {
    const log = recordLog();
    const smtp = mailer({ smtpUrl: `smtp://127.0.0.1:${await closedPort()}`, log: log.log, retryDelaysMs: [10] });

    expect(() => smtp.send(SIGNUP)).not.toThrow();
    await smtp.idle();

    expect(log.lines).toEqual([
      expect.stringMatching(/^mail to alice@example.com failed \(attempt 1\): .+; retrying in 10 ms$/),
      expect.stringMatching(/^mail to alice@example.com failed \(attempt 2\): .+; giving up$/),
    ]);
  });

  it('does not retry a permanent (5xx) rejection', async () => {
    const server = await startSmtpServer(() => Object.assign(new Error('no such mailbox'), { responseCode: 550 }));
    const log = recordLog();
    const smtp = mailer({ smtpUrl: server.url, log: log.log, retryDelaysMs: [10, 10] });

    smtp.send(SIGNUP);
    await smtp.idle();

    expect(server.attempts()).toBe(1);
    expect(log.lines).toEqual([expect.stringMatching(/no such mailbox.*; giving up \(permanent rejection\)$/)]);
  });

  it('close() gives a message waiting for a retry its last attempt at once', async () => {
    const server = await startSmtpServer((attempt) => (attempt === 1 ? new Error('try later') : undefined));
    const log = recordLog();
    const smtp = mailer({ smtpUrl: server.url, log: log.log, retryDelaysMs: [600_000] });

    smtp.send(SIGNUP);
    await log.until('retrying in 600000 ms');
    await smtp.close();

    expect(server.attempts()).toBe(2);
    expect(await server.delivered).toContain('Your code is 123456');
    smtp.send(SIGNUP);
    expect(log.lines.at(-1)).toBe('mail to alice@example.com dropped: the mailer is closed');
  });

  it('refuses a URL that is not smtp:// or smtps:// when the mailer is created', () => {
    expect(() =>
      createMailer({ smtpUrl: 'http://mail.example.com', from: FROM, logFile: 'unused', log: () => {} }),
    ).toThrow(/smtp:\/\/ or smtps:\/\//);
  });
});
