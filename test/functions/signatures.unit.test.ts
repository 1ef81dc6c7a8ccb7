/**
 * The signatures `svcgen generate` reads from the migrations (generator/model/function-signatures.ts;
 * docs/own-code.md "Database functions"), without a database.
 */
import { describe, expect, it } from 'vitest';
import { describeModel } from '../../generator/model/describe-model.ts';
import { functionSignatures, tokenize } from '../../generator/model/function-signatures.ts';
import { readDmmf } from '../../generator/prisma/index.ts';

const model = { enums: new Map([['OrderStatus', ['PENDING', 'PAID']]]), tables: [] };
const one = (sql: string, names = ['f']) => functionSignatures(names, [{ name: '001_m', sql }], model);

describe('reading CREATE FUNCTION', () => {
  it('reads names, types, DEFAULTs, RETURNS TABLE and the volatility', () => {
    const [spec] = one(
      `CREATE OR REPLACE FUNCTION f(since date, status "OrderStatus" DEFAULT NULL, n int = 3, tags text[] DEFAULT '{}', at timestamp(3) with time zone DEFAULT now())
       RETURNS TABLE(day date, orders bigint, revenue double precision, other point) LANGUAGE sql STABLE AS $$ SELECT 1 $$;`,
    );
    expect(spec).toEqual({
      name: 'f',
      arguments: [
        { name: 'since', type: { base: 'date', array: false }, hasDefault: false },
        {
          name: 'status',
          type: { base: 'enum', enumName: 'OrderStatus', enumValues: ['PENDING', 'PAID'], array: false },
          hasDefault: true,
        },
        { name: 'n', type: { base: 'int4', array: false }, hasDefault: true },
        { name: 'tags', type: { base: 'text', array: true }, hasDefault: true },
        { name: 'at', type: { base: 'timestamptz', array: false }, hasDefault: true },
      ],
      returns: {
        kind: 'table',
        columns: [
          { name: 'day', column: 'day', type: { base: 'date', array: false } },
          { name: 'orders', column: 'orders', type: { base: 'int8', array: false } },
          { name: 'revenue', column: 'revenue', type: { base: 'float8', array: false } },
          { name: 'other', column: 'other', type: 'other' },
        ],
      },
      volatility: 'stable',
      migration: '001_m',
    });
  });

  it('the last definition wins; DROP FUNCTION forgets one; bodies, strings and comments are not statements', () => {
    const sql = `
      CREATE FUNCTION f(a int) RETURNS int LANGUAGE sql AS 'SELECT 1; CREATE FUNCTION f(b text) RETURNS text';
      -- CREATE FUNCTION f(c uuid) RETURNS uuid;
      /* CREATE FUNCTION f(d uuid) /* nested */ RETURNS uuid; */
      DROP FUNCTION IF EXISTS f(integer);
      CREATE FUNCTION f(x bigint) RETURNS SETOF bigint LANGUAGE plpgsql IMMUTABLE AS $fn$ BEGIN RETURN NEXT x; END $fn$;`;
    expect(one(sql)[0]).toMatchObject({
      arguments: [{ name: 'x', type: { base: 'int8', array: false } }],
      returns: { kind: 'scalar', type: { base: 'int8', array: false }, set: true },
      volatility: 'immutable',
    });
    expect(tokenize('E\'it\\\'s\' $$ a ; b $$ "Q""x"')).toEqual([
      { kind: 'string', text: "it's" },
      { kind: 'string', text: ' a ; b ' },
      { kind: 'quoted', text: 'Q"x' },
    ]);
    const later = functionSignatures(
      ['f'],
      [
        { name: '001_a', sql: 'CREATE FUNCTION f(a int) RETURNS void LANGUAGE sql AS $$ $$;' },
        { name: '002_b', sql: 'CREATE OR REPLACE FUNCTION f(a int) RETURNS void LANGUAGE sql VOLATILE AS $$ $$;' },
      ],
      model,
    );
    expect(later[0]!.migration).toBe('002_b');
  });

  it('a SETOF of a model table answers its rows by field names', () => {
    const [spec] = functionSignatures(
      ['f'],
      [{ name: '001_m', sql: 'CREATE FUNCTION f() RETURNS SETOF sales LANGUAGE sql AS $$ SELECT * FROM sales $$;' }],
      {
        enums: new Map(),
        tables: [
          {
            name: 'Sale',
            dbName: 'sales',
            fields: [
              { name: 'id', column: 'id' },
              { name: 'sellerId', column: 'seller_id' },
            ],
          } as never,
        ],
      },
    );
    expect(spec!.returns).toEqual({
      kind: 'rows',
      table: 'Sale',
      tableDbName: 'sales',
      columns: [
        { name: 'id', column: 'id', type: 'other' },
        { name: 'sellerId', column: 'seller_id', type: 'other' },
      ],
    });
  });
});

describe('what generate refuses, naming the function', () => {
  it('a configured function no migration creates', () => {
    expect(() => one('CREATE TABLE x (a int);', ['sales_report'])).toThrow(
      'functions.sales_report of svcgen.config.json: no migration creates a function named sales_report; add `CREATE FUNCTION sales_report(...) RETURNS ...` to a migration (migrations/<name>/migration.sql) or remove it from functions',
    );
    expect(() => one('CREATE FUNCTION f() RETURNS int AS $$ SELECT 1 $$; DROP FUNCTION f;')).toThrow(
      'no migration creates a function named f',
    );
  });

  it('an overload, an unnamed argument, an OUT parameter, a type it cannot validate, a schema name', () => {
    expect(() =>
      one('CREATE FUNCTION f(a int) RETURNS int AS $$ $$; CREATE FUNCTION f(a text) RETURNS int AS $$ $$;'),
    ).toThrow(
      'function f is overloaded (f(int4), f(text)): svcgen serves one function per name; DROP FUNCTION the others in a migration',
    );
    expect(() => one('CREATE FUNCTION f(int) RETURNS int AS $$ $$;')).toThrow(
      'function f (migrations/001_m/migration.sql): every argument needs a name (callers pass arguments by name): `since date`, not `date`',
    );
    expect(() => one('CREATE FUNCTION f(OUT a int) RETURNS int AS $$ $$;')).toThrow(
      'function f (migrations/001_m/migration.sql): OUT parameters are not supported: return rows with RETURNS TABLE(...)',
    );
    expect(() => one('CREATE FUNCTION f(p point) RETURNS int AS $$ $$;')).toThrow(
      'function f (migrations/001_m/migration.sql): argument p has a type svcgen cannot validate (point); use smallint, integer, bigint, numeric, real, double precision, text, varchar, boolean, date, timestamp, timestamptz, uuid, json, jsonb, an enum of schema.prisma, or an array of one of them',
    );
    expect(() => one('CREATE FUNCTION f(s "Unknown") RETURNS int AS $$ $$;')).toThrow('argument s has a type');
    expect(() => one('CREATE FUNCTION f() RETURNS SETOF record AS $$ $$;')).toThrow(
      'function f (migrations/001_m/migration.sql): it returns SETOF record, which svcgen cannot describe',
    );
    expect(() => one('CREATE FUNCTION public.f() RETURNS int AS $$ $$;')).toThrow(
      "function f (migrations/001_m/migration.sql): create it without a schema name: migrations run with the environment's schema first on the search_path, and the function must live there",
    );
  });
});

describe('the rpc path is reserved', () => {
  it('a model named rpc is refused, as the other names of the data API are', async () => {
    const dmmf = await readDmmf(
      'datasource db {\n  provider = "postgresql"\n}\nmodel rpc {\n  id Int @id\n  createdAt DateTime @default(now())\n  updatedAt DateTime @updatedAt\n}\n',
    );
    expect(() => describeModel(dmmf)).toThrow('model rpc: the name is reserved by the REST API');
  });
});
