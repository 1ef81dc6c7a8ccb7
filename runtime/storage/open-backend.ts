/** The backend storage.backend names (docs/storage.md "Backends"), for the server and the CLI alike. */
import path from 'node:path';
import type { Config } from '../config/index.ts';
import { LocalDiskBackend } from './local-disk.ts';
import { S3Backend } from './s3.ts';

/**
 * Local disk under storage.backend.root, else storage.root (relative to the project folder), or
 * the S3 bucket; `log` hears what the store answered when it fails. Close an S3Backend when done.
 */
export function openBackend(
  storage: Config['storage'],
  projectDir: string,
  log: (message: string) => void,
): LocalDiskBackend | S3Backend {
  const chosen = storage.backend;
  if (chosen.type === 's3') return new S3Backend(chosen, log);
  return new LocalDiskBackend(path.resolve(projectDir, chosen.root ?? storage.root));
}
