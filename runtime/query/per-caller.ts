/**
 * Values kept per caller (its Access: one object per principal, runtime/query/policy.ts) and key,
 * such as a list's compiled statement or a resolved select. Two callers never share an entry: each
 * Access gets its own number, never reused. At most `max` entries are kept across all callers,
 * the oldest dropped first, so many callers with many shapes cannot grow memory without bound.
 */
export class PerCallerCache<V> {
  private readonly callers = new WeakMap<object, number>();
  private nextCaller = 0;
  private readonly entries = new Map<string, V>();

  constructor(private readonly max: number) {}

  get(caller: object, key: string): V | undefined {
    const id = this.callers.get(caller);
    return id === undefined ? undefined : this.entries.get(`${id}\n${key}`);
  }

  set(caller: object, key: string, value: V): void {
    let id = this.callers.get(caller);
    if (id === undefined) this.callers.set(caller, (id = this.nextCaller++));
    if (this.entries.size >= this.max) this.entries.delete(this.entries.keys().next().value!);
    this.entries.set(`${id}\n${key}`, value);
  }
}
