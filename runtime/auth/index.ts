export { authenticate } from './authenticate.ts';
export { principalVariables, type Principal } from './principal.ts';
