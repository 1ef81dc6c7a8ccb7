/**
 * Secrets the server must read back (signing keys' private parts, later webhook secrets) are
 * sealed with AES-256-GCM. The key comes from SVCGEN_SECRET when it is set (then a copy of the
 * database alone reveals nothing) and otherwise from a random secret kept in the database (a
 * development default). A sealed value names its key source, so turning SVCGEN_SECRET on later
 * still opens what was sealed before.
 */
import { createCipheriv, createDecipheriv, hkdfSync, randomBytes } from 'node:crypto';
import type { Database } from '../db/index.ts';
import { serverSecret } from './server-secrets.ts';

type KeySource = 'env' | 'db';

export class SecretBox {
  private constructor(
    private readonly keys: Partial<Record<KeySource, Buffer>>,
    private readonly current: KeySource,
  ) {}

  static async open(db: Database, envSecret: string | undefined): Promise<SecretBox> {
    const derive = (secret: string) => Buffer.from(hkdfSync('sha256', secret, 'svcgen', 'secret-box v1', 32));
    const keys: Partial<Record<KeySource, Buffer>> = { db: derive(await serverSecret(db, 'secret-box')) };
    if (envSecret) keys.env = derive(envSecret);
    return new SecretBox(keys, envSecret ? 'env' : 'db');
  }

  seal(plain: string): string {
    const iv = randomBytes(12);
    const cipher = createCipheriv('aes-256-gcm', this.keys[this.current]!, iv);
    const sealed = Buffer.concat([cipher.update(plain, 'utf8'), cipher.final()]);
    return [
      'v1',
      this.current,
      iv.toString('base64url'),
      sealed.toString('base64url'),
      cipher.getAuthTag().toString('base64url'),
    ].join('.');
  }

  unseal(value: string): string {
    const [version, source, iv, sealed, tag] = value.split('.');
    const key = this.keys[source as KeySource];
    if (version !== 'v1' || !key || !iv || sealed === undefined || !tag) {
      throw new Error(
        source === 'env'
          ? 'a stored secret was sealed with SVCGEN_SECRET, which is not set now: start the server with the same SVCGEN_SECRET'
          : 'a stored secret has an unknown format',
      );
    }
    const decipher = createDecipheriv('aes-256-gcm', key, Buffer.from(iv, 'base64url'));
    decipher.setAuthTag(Buffer.from(tag, 'base64url'));
    try {
      return Buffer.concat([decipher.update(Buffer.from(sealed, 'base64url')), decipher.final()]).toString('utf8');
    } catch {
      throw new Error('a stored secret could not be opened: SVCGEN_SECRET differs from the one it was sealed with');
    }
  }
}
