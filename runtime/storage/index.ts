/** File storage (docs/storage.md): buckets of files beside the data, with the data API's permissions. */
export {
  ObjectMissing,
  objectKey,
  parseObjectKey,
  type ByteRange,
  type StorageBackend,
  type StoredObject,
} from './backend.ts';
export { BucketAccess } from './bucket-access.ts';
export { content, list, metadata, remove, signedUrl, upload, type StorageDeps } from './endpoints.ts';
export {
  queueRemoval,
  REMOVE_MAX_ATTEMPTS,
  REMOVE_TASK,
  startRemovalWorker,
  sweepOrphans,
  type RemovalWorker,
} from './jobs.ts';
export { InFlight } from './in-flight.ts';
export { pruneUsage } from './limits.ts';
export { listFiles, removeFile, type ListedFile } from './operator.ts';
export { LocalDiskBackend } from './local-disk.ts';
export { openBackend } from './open-backend.ts';
export { S3Backend, storageUnavailable, type S3Settings } from './s3.ts';
export { UrlSigner } from './signed-urls.ts';
