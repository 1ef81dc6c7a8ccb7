// The per-document budget of runtime/graphql/document-budget.ts: answer bytes, expensive reads one
// at a time, no read started past the document's time, and its root fields as the rate limit counts them.
import { Kind, parse, type FragmentDefinitionNode, type OperationDefinitionNode } from 'graphql';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { AnswerTooLarge, countRootFields, DocumentBudget } from '../../runtime/graphql/document-budget.ts';
import { Problem } from '../../runtime/http/index.ts';

afterEach(() => void vi.useRealTimers());

describe('DocumentBudget', () => {
  it('counts answer bytes up to the bound; the read that would pass it is refused and not counted', () => {
    const budget = new DocumentBudget(100, 0);
    budget.take(60);
    expect(() => budget.take(41)).toThrow(AnswerTooLarge);
    budget.take(40);
    expect(() => budget.take(1)).toThrow(
      'the answer would pass 100 bytes of JSON (graphql.maxAnswerBytes); this field',
    );
  });

  it('runs expensive reads one after another, a failed one not stopping the next', async () => {
    const budget = new DocumentBudget(100, 0);
    const events: string[] = [];
    const releases: (() => void)[] = [];
    const read = (name: string, fail = false) =>
      budget.oneAtATime(
        () =>
          new Promise<string>((resolve, reject) => {
            events.push(`start ${name}`);
            releases.push(() => (fail ? reject(new Error(name)) : resolve(name)));
          }),
      );
    const a = read('a', true);
    const b = read('b');
    const c = read('c');
    await Promise.resolve();
    await Promise.resolve();
    expect(events).toEqual(['start a']);
    releases[0]!();
    await expect(a).rejects.toThrow('a');
    await vi.waitFor(() => expect(events).toEqual(['start a', 'start b']));
    releases[1]!();
    await expect(b).resolves.toBe('b');
    await vi.waitFor(() => expect(events).toEqual(['start a', 'start b', 'start c']));
    releases[2]!();
    await expect(c).resolves.toBe('c');
  });

  it('starts no read once the document has run database.statementTimeoutMs (0: no bound)', async () => {
    vi.useFakeTimers({ toFake: ['performance'] });
    const budget = new DocumentBudget(100, 1000);
    const unbounded = new DocumentBudget(100, 0);
    budget.checkTime();
    vi.advanceTimersByTime(1001);
    unbounded.checkTime();
    let thrown: unknown;
    try {
      budget.checkTime();
    } catch (error) {
      thrown = error;
    }
    expect(thrown).toBeInstanceOf(Problem);
    expect((thrown as Problem).kind).toBe('statement-timeout');
    expect((thrown as Problem).headers).toEqual({ 'retry-after': '1' });
    let ran = false;
    await expect(
      budget.oneAtATime(async () => {
        ran = true;
      }),
    ).rejects.toBeInstanceOf(Problem);
    expect(ran).toBe(false);
  });
});

describe('countRootFields', () => {
  const count = (text: string) => {
    const document = parse(text);
    const operation = document.definitions.find((d) => d.kind === Kind.OPERATION_DEFINITION) as OperationDefinitionNode;
    const fragments = (name: string) =>
      document.definitions.find((d) => d.kind === Kind.FRAGMENT_DEFINITION && d.name.value === name) as
        | FragmentDefinitionNode
        | undefined;
    return countRootFields(operation, fragments);
  };
  it.each([
    ['{ cityList { id } }', 1],
    ['{ a: cityList { id } b: cityList { id } c: city(id: 1) { id } }', 3],
    ['{ __typename }', 1],
    ['{ cityList { id } __typename }', 1],
    [
      '{ ...Q ... on Query { b: cityList { id } } } fragment Q on Query { a: cityList { id } c: city(id: 1) { id } }',
      3,
    ],
    ['{ ...Q ...Q } fragment Q on Query { a: cityList { id } }', 1],
  ])('%s: %i', (text, expected) => {
    expect(count(text)).toBe(expected);
  });
});
