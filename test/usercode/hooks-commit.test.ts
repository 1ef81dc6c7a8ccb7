// When afterCommit work runs (runtime/db onCommit, docs/own-code.md "Hooks"): after the commit of
// the transaction it was registered in, never after a rollback, nor when the savepoint it was
// registered under rolls back; at once outside a transaction. And the gate of a hook's context:
// closed, it sends nothing to the transaction.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  gatedTransaction,
  onCommit,
  openDatabase,
  transactionDatabase,
  type Database,
} from '../../runtime/db/index.ts';
import { databaseServerUrl } from '../support/database.ts';
import { until } from '../support/until.ts';

let db: Database;
const statements: string[] = [];

beforeAll(() => {
  db = openDatabase(databaseServerUrl(), { max: 2, onQuery: (text) => void statements.push(text) });
});
afterAll(() => db?.close());

/** Lets every setImmediate queued so far run. */
const turn = () => new Promise((resolve) => setImmediate(resolve));

describe('onCommit', () => {
  it('runs after the commit, not before, and only what the rolled-back savepoint did not register', async () => {
    const ran: string[] = [];
    await db.transaction(async (tx) => {
      const outer = transactionDatabase(db.pool, tx);
      onCommit(outer, () => ran.push('outer'));
      await outer
        .transaction(async (inner) => {
          onCommit(inner, () => ran.push('rolled back'));
          throw new Error('undo');
        })
        .catch(() => {});
      await outer.transaction(async (inner) => {
        onCommit(transactionDatabase(db.pool, inner), () => ran.push('released'));
      });
      await turn();
      expect(ran).toEqual([]);
    });
    await until(
      async () => ran.length,
      (n) => n === 2,
      5000,
      'the callbacks after the commit',
    );
    expect(ran).toEqual(['outer', 'released']);
  });

  it('drops everything when the transaction rolls back', async () => {
    const ran: string[] = [];
    await db
      .transaction(async (tx) => {
        onCommit(transactionDatabase(db.pool, tx), () => ran.push('never'));
        throw new Error('undo');
      })
      .catch(() => {});
    await turn();
    await turn();
    expect(ran).toEqual([]);
  });

  it('runs on the next turn outside a transaction', async () => {
    const ran: string[] = [];
    onCommit(db, () => ran.push('now'));
    expect(ran).toEqual([]);
    await turn();
    expect(ran).toEqual(['now']);
  });
});

describe('gatedTransaction', () => {
  it('runs statements while open and refuses them once closed, sending nothing', async () => {
    let open = true;
    await db.transaction(async (tx) => {
      const gated = gatedTransaction(
        db.pool,
        tx,
        () => open,
        () => new Error('closed'),
      );
      expect(await gated.query('SELECT 1 AS one')).toEqual([{ one: 1 }]);
      onCommit(gated, () => {});
      open = false;
      statements.length = 0;
      await expect(gated.query('SELECT 2')).rejects.toThrow('closed');
      await expect(gated.transaction(async () => 1)).rejects.toThrow('closed');
      expect(statements).toEqual([]);
    });
  });
});
