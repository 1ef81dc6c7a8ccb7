export { UserAuth, type UserAuthOptions } from './user-auth.ts';
export { accountRoutes, authHandlers } from './endpoints.ts';
