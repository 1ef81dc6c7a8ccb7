/**
 * The source stream of one subscription: changes pushed by the hub, pulled by graphql-js's
 * subscribe() as graphql-ws sends them. Bounded by its producer (matching.ts closes a socket whose
 * queue is full). `return()` (the client completed, or the socket closed) ends it and runs the
 * `onEnd` callbacks once.
 */
export class LiveQueue<T> implements AsyncIterableIterator<T> {
  private readonly items: T[] = [];
  private waiting: ((result: IteratorResult<T>) => void) | undefined;
  private ended = false;
  private readonly endings: (() => void)[] = [];

  get length(): number {
    return this.items.length;
  }

  push(item: T): void {
    if (this.ended) return;
    const waiting = this.waiting;
    if (waiting) {
      this.waiting = undefined;
      waiting({ value: item, done: false });
    } else this.items.push(item);
  }

  onEnd(callback: () => void): void {
    if (this.ended) callback();
    else this.endings.push(callback);
  }

  next(): Promise<IteratorResult<T>> {
    if (this.items.length) return Promise.resolve({ value: this.items.shift()!, done: false });
    if (this.ended) return Promise.resolve({ value: undefined, done: true });
    return new Promise((resolve) => {
      this.waiting = resolve;
    });
  }

  return(): Promise<IteratorResult<T>> {
    if (!this.ended) {
      this.ended = true;
      this.items.length = 0;
      this.waiting?.({ value: undefined, done: true });
      this.waiting = undefined;
      for (const callback of this.endings.splice(0)) callback();
    }
    return Promise.resolve({ value: undefined, done: true });
  }

  [Symbol.asyncIterator](): this {
    return this;
  }
}
