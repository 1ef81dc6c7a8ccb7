/**
 * The RSA keys of one environment: one signing key (RS256) and, with `auth.jwe`, one encryption
 * key (RSA-OAEP-256). Made on first start, kept in the database with the private part sealed, so
 * every server process and every restart uses the same keys and none is in the repository.
 */
import { randomBytes } from 'node:crypto';
import { exportJWK, generateKeyPair, importJWK, type CryptoKey, type JWK } from 'jose';
import type { Database } from '../../db/index.ts';
import type { SecretBox } from '../../secrets/index.ts';

export type KeyUse = 'sig' | 'enc';
const ALGORITHMS: Record<KeyUse, string> = { sig: 'RS256', enc: 'RSA-OAEP-256' };

export interface KeyPair {
  readonly kid: string;
  readonly use: KeyUse;
  readonly alg: string;
  readonly privateKey: CryptoKey;
  readonly publicKey: CryptoKey;
  /** What the JWKS publishes: kty, kid, use, alg, n, e. */
  readonly publicJwk: JWK;
}

export interface EnvironmentKeys {
  readonly sig: KeyPair;
  readonly enc?: KeyPair;
}

interface KeyRow {
  kid: string;
  public_jwk: JWK;
  private_jwk: string;
}

async function toKeyPair(row: KeyRow, use: KeyUse, box: SecretBox): Promise<KeyPair> {
  const alg = ALGORITHMS[use];
  const privateJwk = JSON.parse(box.unseal(row.private_jwk)) as JWK;
  return {
    kid: row.kid,
    use,
    alg,
    privateKey: (await importJWK(privateJwk, alg)) as CryptoKey,
    publicKey: (await importJWK(row.public_jwk, alg)) as CryptoKey,
    // jsonb keeps its own key order: publish in the order docs/api.md §3 shows (kty, kid, use, alg, n, e).
    publicJwk: { kty: 'RSA', kid: row.kid, use, alg, n: row.public_jwk.n, e: row.public_jwk.e },
  };
}

async function loadOrCreate(
  db: Database,
  box: SecretBox,
  projectId: string,
  environment: string,
  use: KeyUse,
): Promise<KeyPair> {
  const select = () =>
    db.query<KeyRow>(
      'SELECT kid, public_jwk, private_jwk FROM svcgen.signing_keys WHERE project_id = $1 AND environment = $2 AND use = $3',
      [projectId, environment, use],
    );
  let rows = await select();
  if (rows.length === 0) {
    const alg = ALGORITHMS[use];
    const { privateKey, publicKey } = await generateKeyPair(alg, { modulusLength: 2048, extractable: true });
    const kid = randomBytes(12).toString('base64url');
    const { n, e } = await exportJWK(publicKey);
    const publicJwk: JWK = { kty: 'RSA', kid, use, alg, n, e };
    // Two processes starting at once may both make a key: the first insert wins, both read it back.
    await db.query(
      `INSERT INTO svcgen.signing_keys (project_id, environment, use, kid, public_jwk, private_jwk)
       VALUES ($1, $2, $3, $4, $5, $6) ON CONFLICT (project_id, environment, use) DO NOTHING`,
      [
        projectId,
        environment,
        use,
        kid,
        JSON.stringify(publicJwk),
        box.seal(JSON.stringify(await exportJWK(privateKey))),
      ],
    );
    rows = await select();
  }
  return toKeyPair(rows[0]!, use, box);
}

export async function loadEnvironmentKeys(
  db: Database,
  box: SecretBox,
  projectId: string,
  environment: string,
  encryption: boolean,
): Promise<EnvironmentKeys> {
  const sig = await loadOrCreate(db, box, projectId, environment, 'sig');
  return encryption ? { sig, enc: await loadOrCreate(db, box, projectId, environment, 'enc') } : { sig };
}

/** The JWKS document: the signing key, plus the encryption key when JWE is on. */
export function jwks(keys: EnvironmentKeys): { keys: JWK[] } {
  return { keys: keys.enc ? [keys.sig.publicJwk, keys.enc.publicJwk] : [keys.sig.publicJwk] };
}
