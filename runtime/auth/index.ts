export { UserAuth, type UserAuthOptions } from './user-auth.ts';
export { authHandlers } from './endpoints.ts';
