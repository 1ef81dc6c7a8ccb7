export { UserAuth, type UserAuthOptions } from './user-auth.ts';
export { authRoutes, authHandlers } from './endpoints.ts';
