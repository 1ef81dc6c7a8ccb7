/** User code (docs/own-code.md) for the runtime and the CLI: its definitions, their registry, contexts. */
export * from './public.ts';
export { CodeRegistry } from './registry.ts';
export { withInternals, contextInternals, type ContextInternals } from './internals.ts';
export {
  CODE_TASK_PREFIX,
  codeCrontab,
  enqueueCodeJob,
  startCodeJobRunner,
  taskOf,
  listFailedJobs,
  retryFailedJobs,
  type CodeJobRunner,
  type FailedJob,
} from './jobs.ts';
export { codeContext, callerOf, type CodeScope, type CodeServices } from './context.ts';
export { anonymousPrincipal, isSystemPrincipal, SYSTEM_ACCESS, systemPrincipal } from './system.ts';
export { checkExtraClaims, checkMailAnswer } from './auth-hooks.ts';
export { endpointJsonSchemas } from './json-schema.ts';
