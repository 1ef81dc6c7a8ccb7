export { Policy, type Action } from './policy.ts';
