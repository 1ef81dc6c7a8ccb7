/**
 * The data REST API: one handler per operation of the generated route table, each reading the HTTP
 * request into a call of runtime/data and writing its outcome as the answer.
 */
import type { Operation } from '../model/index.ts';
import type { Reply } from '../http/index.ts';
import type { Action } from '../query/index.ts';
import { asProblem, type DataContext } from '../data/index.ts';
import { aggregate } from './aggregate.ts';
import { bulkCreate, bulkDelete } from './bulk.ts';
import { queryBody } from './query-body.ts';
import { list, readOne } from './read.ts';
import { create, remove, update, updateMany } from './write.ts';

export interface OperationHandler {
  /** The role action the operation needs (docs/api.md §5.17: every data operation is checked). */
  readonly action: Action;
  readonly handle: (ctx: DataContext) => Promise<Reply>;
}

/** A handler whose query-layer refusals answer as Problems (400 for a query, 403 for a write). */
function operation(action: Action, handle: (ctx: DataContext) => Promise<Reply>): OperationHandler {
  // answeringQueryErrors, without its closure and second async layer per request
  return {
    action,
    handle: async (ctx) => {
      try {
        return await handle(ctx);
      } catch (error) {
        throw asProblem(error);
      }
    },
  };
}

export const OPERATIONS: Partial<Record<Operation, OperationHandler>> = {
  list: operation('read', list),
  read: operation('read', readOne),
  create: operation('create', create),
  update: operation('update', update),
  delete: operation('delete', remove),
  updateMany: operation('update', updateMany),
  bulkCreate: operation('create', bulkCreate),
  bulkDelete: operation('delete', bulkDelete),
  aggregate: operation('read', aggregate),
  query: operation('read', queryBody),
};
