/**
 * What a bucket accepts (storage.buckets.<name>.contentTypes) and whether the first bytes agree with
 * the declared type. Sniffing uses file-type's magic numbers: a declared type that file-type can
 * recognise must be what the bytes are; a type it cannot recognise (text, JSON, CSV) is taken as
 * declared, unless the bytes are recognisably something else.
 */
import { fileTypeFromBuffer, supportedMimeTypes } from 'file-type';

/** Bytes file-type looks at; it recognises every type it knows within them. */
export const SNIFF_BYTES = 4100;

const MEDIA_TYPE = /^[a-z0-9][a-z0-9!#$&^_.+-]*\/[a-z0-9][a-z0-9!#$&^_.+-]*$/;

/** `type/subtype` in lower case without parameters, or undefined when it is not a media type. */
export function mediaType(value: string | undefined): string | undefined {
  const type = value?.split(';')[0]?.trim().toLowerCase();
  return type && MEDIA_TYPE.test(type) ? type : undefined;
}

export function allowedBy(patterns: readonly string[], type: string): boolean {
  const [main] = type.split('/');
  return patterns.some((p) => p === '*/*' || p === type || p === `${main}/*`);
}

/** Why the first bytes contradict `declared`, or undefined when they agree. */
export async function contentMismatch(declared: string, head: Uint8Array): Promise<string | undefined> {
  const detected = (await fileTypeFromBuffer(head))?.mime;
  if (detected === declared) return undefined;
  if (detected) return `the file was declared ${declared} but its content is ${detected}`;
  if (supportedMimeTypes.has(declared)) return `the file was declared ${declared} but its content is not ${declared}`;
  return undefined;
}
