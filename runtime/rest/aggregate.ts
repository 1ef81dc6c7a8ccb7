/** GET /<table>/_aggregate (docs/api.md §5.9). */
import { rawJsonReply, type Reply } from '../http/index.ts';
import { aggregateMismatch, MAX_AGGREGATE_ROWS, RESERVED_PARAMETERS } from '../model/index.ts';
import {
  canReadField,
  compileAggregate,
  QueryError,
  type AggregateFunction,
  type AggregateTerm,
  type FilterContext,
  type HavingTerm,
} from '../query/index.ts';
import { AGGREGATE_COST, budgeted, filterContext, readScope, type DataContext } from '../data/index.ts';
import { parseFilters } from './list-params.ts';

const RESERVED: ReadonlySet<string> = new Set(RESERVED_PARAMETERS.aggregate);

function aggregateField(ctx: FilterContext, name: string, fn: AggregateFunction) {
  const field = ctx.table.fields.get(name);
  if (!field || !canReadField(ctx.access, ctx.table, name))
    throw new QueryError('fn', `${ctx.table.spec.name} has no field "${name}"`);
  const mismatch = fn === 'count' ? undefined : aggregateMismatch(field, fn);
  if (mismatch) throw new QueryError('fn', mismatch);
  return field;
}

function parseTerms(ctx: FilterContext, text: string): AggregateTerm[] {
  const terms: AggregateTerm[] = [];
  for (const raw of text.split(',')) {
    const [fn, field, extra] = raw.trim().split(':');
    if (fn === 'count' && field === undefined) terms.push({ fn: 'count', alias: 'count' });
    else if (fn && ['sum', 'avg', 'min', 'max', 'count_distinct'].includes(fn) && field && extra === undefined) {
      aggregateField(ctx, field, fn as AggregateFunction);
      terms.push({ fn: fn as AggregateFunction, field, alias: `${fn}_${field}` });
    } else {
      throw new QueryError('fn', `"${raw}" must be count, or sum|avg|min|max|count_distinct:<field>`);
    }
  }
  const seen = new Set<string>();
  for (const t of terms) {
    if (seen.has(t.alias)) throw new QueryError('fn', `${t.alias} is asked for twice`);
    seen.add(t.alias);
  }
  if (terms.length > 20) throw new QueryError('fn', 'at most 20 functions');
  return terms;
}

/** Whether an aggregate's value is a number (having compares numbers): min and max of text or dates are not. */
function numericAggregate(ctx: FilterContext, term: AggregateTerm): boolean {
  if (term.fn !== 'min' && term.fn !== 'max') return true;
  const type = ctx.table.fields.get(term.field!)!.type;
  return type === 'Int' || type === 'BigInt' || type === 'Float' || type === 'Decimal';
}

export async function aggregate(ctx: DataContext): Promise<Reply> {
  const fctx = filterContext(ctx);
  const q = ctx.req.query;
  const scope = readScope(ctx);
  const terms = parseTerms(fctx, q.get('fn') ?? 'count');
  const aliases = new Set(terms.map((t) => t.alias));
  const groupBy = (q.get('groupBy') ?? '').split(',').filter((s) => s !== '');
  for (const name of groupBy) {
    const field = fctx.table.fields.get(name);
    if (!field || !canReadField(fctx.access, fctx.table, name))
      throw new QueryError('groupBy', `${fctx.table.spec.name} has no field "${name}"`);
    if (field.list || field.type === 'Json' || field.type === 'Bytes')
      throw new QueryError('groupBy', `${name} cannot be grouped by`);
    if (aliases.has(name))
      throw new QueryError(
        'groupBy',
        `${name} is also the name of an aggregate; rename the field in the model or drop the aggregate`,
      );
  }
  if (new Set(groupBy).size !== groupBy.length) throw new QueryError('groupBy', 'a field appears twice');
  const having: HavingTerm[] = (q.get('having') ?? '')
    .split(',')
    .filter((s) => s !== '')
    .map((raw) => {
      const m = /^([A-Za-z_][A-Za-z0-9_]*)\.(equals|not_equals|gt|gte|lt|lte)\.(-?\d{1,30}(\.\d{1,30})?)$/.exec(raw);
      if (!m)
        throw new QueryError(
          'having',
          `"${raw}" must be <alias>.<equals|not_equals|gt|gte|lt|lte>.<number of at most 30 digits before and after the point>, e.g. count.gt.10`,
        );
      if (!aliases.has(m[1]!))
        throw new QueryError('having', `${m[1]} is not one of the aggregates (${[...aliases].join(', ')})`);
      const term = terms.find((t) => t.alias === m[1])!;
      if (!numericAggregate(fctx, term))
        throw new QueryError('having', `${m[1]} is not a number, and having compares numbers`);
      return { alias: m[1]!, op: m[2] as HavingTerm['op'], value: m[3]! };
    });
  const orderBy = (q.get('sort') ?? '')
    .split(',')
    .filter((s) => s !== '')
    .map((raw) => {
      const desc = raw.startsWith('-') || raw.endsWith('.desc');
      const name = raw.replace(/^-/, '').replace(/\.(asc|desc)$/, '');
      if (!aliases.has(name) && !groupBy.includes(name))
        throw new QueryError('sort', `sort by an aggregate or a groupBy field, not "${name}"`);
      return { name, direction: desc ? ('desc' as const) : ('asc' as const) };
    });
  const limitText = q.get('limit');
  if (
    limitText !== null &&
    (!/^\d{1,6}$/.test(limitText) || Number(limitText) < 1 || Number(limitText) > MAX_AGGREGATE_ROWS)
  ) {
    throw new QueryError('limit', `must be a whole number from 1 to ${MAX_AGGREGATE_ROWS}`);
  }
  const sql = compileAggregate(scope, {
    table: ctx.table.spec.name,
    terms,
    groupBy,
    where: parseFilters(fctx, q, RESERVED),
    having,
    orderBy,
    limit: limitText ? Number(limitText) : MAX_AGGREGATE_ROWS,
  });
  const rows = await budgeted(ctx, AGGREGATE_COST, () => ctx.db.queryArrays(sql, scope.params.values));
  return rawJsonReply(200, `{"data":{"aggregates":[${rows.map((r) => r[0] as string).join(',')}]}}`);
}
