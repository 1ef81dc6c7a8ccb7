/**
 * A caller's filter split into its shape and its values, so that a statement compiled for one
 * request serves the next request of the same shape with other values (./kept-statements.ts keeps
 * list statements per caller and shape). The shape is the condition with each value that its
 * operator's SQL sends as a parameter (its `placement`, ./operator-implementations.ts) replaced by
 * a slot; compiled, the statement's parameters hold those slots where the values go. Values that
 * shape the SQL text itself (a null, a flag) stay in the shape. A filter with a value that the SQL
 * transforms first (a LIKE pattern, a folded text) has no shape: it is compiled afresh, as
 * free-text searches would otherwise fill the cache with one entry each.
 */
import type { Condition } from './description.ts';
import { OPERATOR_IMPLEMENTATIONS } from './operator-implementations.ts';

/** Where a value of the request goes in a statement compiled from the shape. */
export class Slot {
  constructor(readonly index: number) {}
}

export interface ConditionShape {
  /** The same text for every condition of this shape, whatever its parameter values. */
  readonly key: string;
  /** The condition with slots for its values: what the statement is compiled from. */
  readonly template: Condition;
  /** The values, by slot index. */
  readonly values: readonly unknown[];
}

/** The shape of `condition`, or undefined when it has a value that the SQL holds transformed. */
export function conditionShape(condition: Condition): ConditionShape | undefined {
  const values: unknown[] = [];
  const slot = (value: unknown) => new Slot(values.push(value) - 1);
  const walk = (c: Condition): [string, Condition] | undefined => {
    switch (c.kind) {
      case 'true':
      case 'false':
        return [c.kind, c];
      case 'not': {
        const inner = walk(c.item);
        return inner && [`not(${inner[0]})`, { kind: 'not', item: inner[1] }];
      }
      case 'and':
      case 'or': {
        const keys: string[] = [];
        const items: Condition[] = [];
        for (const item of c.items) {
          const inner = walk(item);
          if (!inner) return undefined;
          keys.push(inner[0]);
          items.push(inner[1]);
        }
        return [`${c.kind}(${keys.join(',')})`, { kind: c.kind, items }];
      }
      case 'compare': {
        const head = `${JSON.stringify(c.path)}.${c.op}`;
        const placement = c.value === null ? 'text' : OPERATOR_IMPLEMENTATIONS[c.op].placement;
        if (placement === 'parameter') return [`${head}.$`, { ...c, value: slot(c.value) }];
        if (placement === 'pair') {
          const [low, high] = c.value as [unknown, unknown];
          return [`${head}.$$`, { ...c, value: [slot(low), slot(high)] }];
        }
        if (placement === 'text') return [`${head}=${JSON.stringify(c.value)}`, c];
        return undefined;
      }
    }
  };
  const shaped = walk(condition);
  return shaped && { key: shaped[0], template: shaped[1], values };
}

/** Where the slots landed among a compiled statement's parameters: [parameter index, slot index] pairs. */
export function slotPositions(parameters: readonly unknown[]): [number, number][] {
  const at: [number, number][] = [];
  parameters.forEach((p, i) => {
    if (p instanceof Slot) at.push([i, p.index]);
  });
  return at;
}
