/** The part of s3rver (3.7, no types of its own) that test/support/s3.ts uses. */
declare module 's3rver' {
  interface S3rverOptions {
    port?: number;
    address?: string;
    silent?: boolean;
    directory: string;
    configureBuckets?: { name: string; configs: unknown[] }[];
  }
  export default class S3rver {
    constructor(options: S3rverOptions);
    run(): Promise<{ address: string; port: number }>;
    close(): Promise<void>;
    /** Its filesystem store; getResourcePath(bucket, undefined, 'uploads') is the folder of multipart uploads. */
    store: { getResourcePath(bucket: string, key: undefined, resource: string): string };
  }
}
