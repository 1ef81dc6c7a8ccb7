/**
 * PostgreSQL functions served as endpoints (docs/own-code.md "Database functions"): their
 * arguments checked against the signature svcgen generated, the call as one role-checked
 * statement with the caller's settings, and the check of the signatures against the database at
 * start. A subsystem of its own beside runtime/usercode: a function is SQL the migrations define,
 * not TypeScript the code entry loads, and it needs nothing of the code registry.
 */
export { parseArguments } from './arguments.ts';
export { callerSettings, callFunction, callStatement, RAISE_SQLSTATE } from './call.ts';
export { checkFunctions, FunctionSignatureDrift } from './check.ts';
export { functionHandler, requireFunctionGrant, type FunctionServices } from './endpoint.ts';
