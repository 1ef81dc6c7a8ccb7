/** What file storage reads from a request (docs/storage.md): the runtime checks with these, OpenAPI is derived from them. */
import { z } from 'zod';

/** The longest file name kept; names are metadata only, never a path. */
export const MAX_FILE_NAME_CHARS = 255;

/**
 * A file's name (the multipart part's filename, or ?name= with a raw body): C0 controls, DEL and
 * C1 controls are refused, so no header or log line can be broken by a stored name.
 */
export const fileName = z
  .string()
  .min(1)
  .max(MAX_FILE_NAME_CHARS)
  // biome-ignore lint/suspicious/noControlCharactersInRegex: the point is to refuse them
  .regex(/^[^\u0000-\u001f\u007f-\u009f]*$/);

/** POST /_files/{bucket}/{id}/signed-url; the upper bound is the config's storage.signedUrlMaxTtl. */
export const signedUrlBody = z.strictObject({
  expiresIn: z
    .number()
    .int()
    .min(1)
    .meta({ description: 'Seconds (storage.signedUrlTtl by default, at most storage.signedUrlMaxTtl)' })
    // null is taken as left out, as it always was.
    .nullish(),
});
