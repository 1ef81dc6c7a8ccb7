export { Problem, AuthError, PROBLEM_KINDS, AUTH_ERRORS, type ProblemKind, type FieldError, type AuthErrorCode } from './problems.ts';
export { header, jsonReply, rawJsonReply, readJson, bodyReader, type ApiRequest, type Reply } from './request.ts';
export { errorReply, type ErrorLogger } from './reply.ts';
export { adapt } from './express-adapter.ts';
export { nodeRequest, run, send, type Handler } from './node-adapter.ts';
export { clientAddress } from './client-address.ts';
export { corsStage, type CorsStage } from './cors.ts';
export { noteCaller, requestLogger, type RequestLogger } from './request-log.ts';
