export {
  Problem,
  AuthError,
  methodNotAllowed,
  PROBLEM_KINDS,
  AUTH_ERRORS,
  type ProblemKind,
  type FieldError,
  type AuthErrorCode,
} from './problems.ts';
export { boundJsonDepth, JsonBodyError, MAX_JSON_DEPTH, parseJsonBody, type JsonBodyRule } from './json-body.ts';
export {
  header,
  jsonBodyProblem,
  jsonReply,
  rawJsonReply,
  readJson,
  bodyReader,
  type ApiRequest,
  type Reply,
} from './request.ts';
export { errorReply, databaseFaultProblem, DATABASE_RETRY_AFTER_SECONDS, type ErrorLogger } from './reply.ts';
export { adapt, adaptStream } from './express-adapter.ts';
export { nodeRequest, run, runStream, send, type Handler, type StreamHandler } from './node-adapter.ts';
export { clientAddress } from './client-address.ts';
export {
  capConnectionsPerAddress,
  connectionRefusal,
  ConnectionsPerAddress,
  CONNECTION_RETRY_SECONDS,
} from './connections-per-address.ts';
export { clientErrorHandler, type ClientErrorLimits } from './client-error.ts';
export { drainableServer, type Drain } from './drain.ts';
export { releaseRequestDeadline, startRequestDeadline } from './request-deadline.ts';
export { corsStage, type CorsStage } from './cors.ts';
export {
  assignRequestId,
  requestId,
  noteCaller,
  noteRoute,
  requestIdOf,
  requestObserver,
  type EntryLogger,
  type RequestObserver,
  type RequestObservers,
  type RequestLineWriter,
} from './request-log.ts';
