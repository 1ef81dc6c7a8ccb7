/** The data REST API: one handler per operation of the generated route table. */
import type { Operation } from '../model/index.ts';
import type { Action } from '../permissions/index.ts';
import type { Reply } from '../http/index.ts';
import type { DataContext } from './context.ts';
import { aggregate } from './aggregate.ts';
import { bulkCreate, bulkDelete } from './bulk.ts';
import { queryBody } from './query-body.ts';
import { list, readOne } from './read.ts';
import { create, remove, update, updateMany } from './write.ts';

export type { DataContext } from './context.ts';
export { roleOperand } from './filter-values.ts';

export interface OperationHandler {
  /** The role action the operation needs (interface: "every data operation is checked"). */
  readonly action: Action;
  readonly handle: (ctx: DataContext) => Promise<Reply>;
}

export const OPERATIONS: Partial<Record<Operation, OperationHandler>> = {
  list: { action: 'read', handle: list },
  read: { action: 'read', handle: readOne },
  create: { action: 'create', handle: create },
  update: { action: 'update', handle: update },
  delete: { action: 'delete', handle: remove },
  updateMany: { action: 'update', handle: updateMany },
  bulkCreate: { action: 'create', handle: bulkCreate },
  bulkDelete: { action: 'delete', handle: bulkDelete },
  aggregate: { action: 'read', handle: aggregate },
  query: { action: 'read', handle: queryBody },
};
