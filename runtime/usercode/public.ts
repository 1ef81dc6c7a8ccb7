/**
 * The `svcgen` package's root: what a project's own code imports (docs/own-code.md). Public API:
 * every export here is typed, documented and kept stable; the runtime's own surface is ./index.ts.
 */
export { codeFor, defineCode, defineEndpoint, defineJob, refuse, CodeDefinitionError } from './define.ts';
export { JobPayloadError } from './job-payload.ts';
export { Problem } from '../http/index.ts';
export { MAX_EXTRA_CLAIMS_BYTES, RESERVED_CLAIMS } from './auth-hooks.ts';
export type {
  AfterWrite,
  AnyService,
  AuthHooks,
  AuthMail,
  BeforeCreate,
  BeforeDelete,
  BeforeUpdate,
  Caller,
  CodeContext,
  CodeDefinition,
  CodeLog,
  CodeMail,
  EndpointAccess,
  EndpointDefinition,
  EndpointMethod,
  FieldMessages,
  JobDefinition,
  JobOptions,
  RenderedMail,
  ScheduleDefinition,
  ServiceTypes,
  SignedUpUser,
  SignUpAttempt,
  Sql,
  TableHooks,
  TableTypes,
} from './definitions.ts';
