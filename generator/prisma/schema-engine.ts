// Prisma's schema engine (the Rust migration engine) as WebAssembly, from
// @prisma/schema-engine-wasm. This replaces the native schema-engine binary
// that `prisma migrate` would try to download.
import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import type {
  ErrorCapturingSqlMigrationAwareDriverAdapterFactory,
  SqlMigrationAwareDriverAdapterFactory,
} from '@prisma/driver-adapter-utils';
import type { SchemaEngine } from '@prisma/schema-engine-wasm';
import { loadDriverAdapterUtils, resolvePackageFile } from './prisma-packages.ts';
import { PrismaEngineError, PrismaSchemaError, stripEngineTrace } from './schema-error.ts';

export type { SchemaEngine };

/** The wasm-bindgen glue module (schema_engine_bg.js), which owns the JS side of one wasm instance. */
interface EngineGlue {
  __wbg_set_wasm(exports: WebAssembly.Exports): void;
  SchemaEngine: typeof SchemaEngine;
}

// The glue's panic hook writes the Rust panic message here (the same global
// @prisma/internals installs for its own wasm modules; either object works).
interface PanicRegistry {
  get(): string;
  set_message(message: string): void;
}
const panicGlobal = globalThis as typeof globalThis & { PRISMA_WASM_PANIC_REGISTRY?: PanicRegistry };
panicGlobal.PRISMA_WASM_PANIC_REGISTRY ??= {
  message: '',
  get() {
    return this.message;
  },
  set_message(message: string) {
    this.message = message;
  },
} as PanicRegistry & { message: string };

let compiledModule: Promise<WebAssembly.Module> | undefined;
let instanceCount = 0;

interface WasmRuntime {
  glue: EngineGlue;
  /** Set after a panic: a panicked Rust instance must never be called again. */
  poisoned: boolean;
  /** Rejects with the first trap (panic) raised inside a callback of this instance; see guardCallback. */
  trapped: Promise<never>;
  offlineEngine?: Promise<BoundEngine>;
}
let current: Promise<WasmRuntime> | undefined;

interface BoundEngine {
  engine: SchemaEngine;
  adapterFactory: ErrorCapturingSqlMigrationAwareDriverAdapterFactory;
}

/**
 * A fresh wasm instance with its own copy of the glue module. The glue keeps
 * module-level state (memory views, externref tables) bound to one instance,
 * so after a panic re-instantiating the wasm is not enough: the glue is
 * imported again under a distinct URL (?instance=N) to get a clean copy.
 * Importing schema_engine.js itself would need --experimental-wasm-modules.
 */
async function createRuntime(): Promise<WasmRuntime> {
  const gluePath = resolvePackageFile('@prisma/schema-engine-wasm/schema_engine_bg');
  compiledModule ??= readFile(path.join(path.dirname(gluePath), 'schema_engine_bg.wasm')).then((bytes) =>
    WebAssembly.compile(bytes),
  );
  const wasmModule = await compiledModule;
  instanceCount += 1;
  const glue = (await import(`${pathToFileURL(gluePath).href}?instance=${instanceCount}`)) as EngineGlue;
  let reportTrap!: (error: unknown) => void;
  const runtime: WasmRuntime = {
    glue,
    poisoned: false,
    trapped: new Promise<never>((_, reject) => {
      reportTrap = reject;
    }),
  };
  // Nobody may be waiting when a late callback of a poisoned instance traps.
  runtime.trapped.catch(() => undefined);
  const onTrap = (error: unknown) => {
    runtime.poisoned = true;
    reportTrap(error);
  };
  const imports = { './schema_engine_bg.js': guardedImports(glue, onTrap) };
  const instance = new WebAssembly.Instance(wasmModule, imports);
  glue.__wbg_set_wasm(instance.exports);
  (instance.exports.__wbindgen_start as () => void)();
  return runtime;
}

type WasmCallback = ((...args: unknown[]) => unknown) & { _wbg_cb_unref?: () => void };

/**
 * The engine's async Rust code runs from JS callbacks (wasm-bindgen closures
 * handed to queueMicrotask, setTimeout and promise.then), not inside the
 * engine call that started it. A panic there is a wasm trap (`RuntimeError:
 * unreachable`) thrown out of a microtask: an uncaught exception that kills
 * the process, while the engine's own promise never settles. Every closure
 * the glue creates for the wasm side (its `__wbindgen_cast_*` imports) is
 * wrapped so that such a trap is handed to `onTrap` instead; the running
 * call then fails with it (see settled()).
 */
function guardedImports(glue: EngineGlue, onTrap: (error: unknown) => void): WebAssembly.ModuleImports {
  const imports: WebAssembly.ModuleImports = { ...(glue as unknown as WebAssembly.ModuleImports) };
  for (const [name, value] of Object.entries(imports)) {
    if (!name.startsWith('__wbindgen_cast_') || typeof value !== 'function') continue;
    const cast = value as (...args: unknown[]) => unknown;
    imports[name] = (...args: unknown[]) => {
      const made = cast(...args);
      return typeof made === 'function' ? guardCallback(made as WasmCallback, onTrap) : made;
    };
  }
  return imports;
}

function guardCallback(callback: WasmCallback, onTrap: (error: unknown) => void): WasmCallback {
  const guarded: WasmCallback = function (this: unknown, ...args: unknown[]) {
    try {
      return callback.apply(this, args);
    } catch (error) {
      onTrap(error);
      return undefined;
    }
  };
  // The glue releases closures through this property of the object it handed out.
  guarded._wbg_cb_unref = () => callback._wbg_cb_unref?.();
  return guarded;
}

/** `work`, or the trap of a callback of this instance if one comes first. */
function settled<T>(runtime: WasmRuntime, work: Promise<T>): Promise<T> {
  return Promise.race([work, runtime.trapped]);
}

async function liveRuntime(): Promise<WasmRuntime> {
  const existing = await current?.catch(() => undefined);
  if (existing && !existing.poisoned) return existing;
  current = createRuntime();
  try {
    return await current;
  } catch (error) {
    // Do not cache a failed start (e.g. unreadable wasm file): the next call retries.
    current = undefined;
    compiledModule = undefined;
    throw error;
  }
}

// One engine call at a time: concurrent calls into the same wasm-bindgen
// object fail with "recursive use of an object", and a panic in one call would
// poison calls running next to it.
let queueTail: Promise<unknown> = Promise.resolve();
function exclusive<T>(task: () => Promise<T>): Promise<T> {
  const result = queueTail.then(task, task);
  queueTail = result.catch(() => undefined);
  return result;
}

async function newEngine(runtime: WasmRuntime, factory: SqlMigrationAwareDriverAdapterFactory): Promise<BoundEngine> {
  const adapterFactory = loadDriverAdapterUtils().bindMigrationAwareSqlAdapterFactory(factory);
  // The callback receives the engine's JSON log lines; svcgen reports errors from results instead.
  const engine = await runtime.glue.SchemaEngine.new({ datamodels: undefined }, () => {}, adapterFactory);
  return { engine, adapterFactory };
}

/** Converts what the engine throws into PrismaSchemaError / PrismaEngineError with clean messages. */
function engineError(error: unknown, runtime: WasmRuntime, bound: BoundEngine | undefined): Error {
  if (!(error instanceof Error)) return new PrismaEngineError(String(error));
  if (error.name === 'RuntimeError') {
    // A Rust panic surfaces as a wasm trap; the instance is unusable from now on.
    runtime.poisoned = true;
    const panic = panicGlobal.PRISMA_WASM_PANIC_REGISTRY?.get() || error.message;
    return new PrismaEngineError(`Prisma schema engine panicked: ${panic}`, undefined, { cause: error });
  }
  const code = (error as { code?: unknown }).code;
  let message = stripEngineTrace(error.message);
  if (code === 'P1012') return new PrismaSchemaError(message);
  // Errors thrown by our JS adapters reach the engine as "External error id#N"; put the original text back.
  message = message.replace(/External error id#(\d+)/g, (text, id: string) => {
    const original = bound?.adapterFactory.errorRegistry.consumeError(Number(id))?.error;
    return original instanceof Error ? `${text}: ${original.message}` : text;
  });
  return new PrismaEngineError(message, typeof code === 'string' ? code : undefined, { cause: error });
}

/**
 * Runs `op` on a schema engine connected through `factory`; the engine is
 * created for this call and freed afterwards (the factory's connections are
 * the caller's to close).
 */
export function withSchemaEngine<T>(
  factory: SqlMigrationAwareDriverAdapterFactory,
  op: (engine: SchemaEngine) => Promise<T>,
): Promise<T> {
  return exclusive(async () => {
    const runtime = await liveRuntime();
    panicGlobal.PRISMA_WASM_PANIC_REGISTRY?.set_message('');
    let bound: BoundEngine | undefined;
    try {
      bound = await settled(runtime, newEngine(runtime, factory));
      return await settled(runtime, op(bound.engine));
    } catch (error) {
      throw engineError(error, runtime, bound);
    } finally {
      if (bound && !runtime.poisoned) bound.engine.free();
    }
  });
}

/**
 * Like withSchemaEngine, but reuses one engine per wasm instance: for the
 * offline factory, which holds no connection, so there is nothing to free.
 */
export function withSharedSchemaEngine<T>(
  factory: () => SqlMigrationAwareDriverAdapterFactory,
  op: (engine: SchemaEngine) => Promise<T>,
): Promise<T> {
  return exclusive(async () => {
    const runtime = await liveRuntime();
    panicGlobal.PRISMA_WASM_PANIC_REGISTRY?.set_message('');
    let bound: BoundEngine | undefined;
    try {
      runtime.offlineEngine ??= newEngine(runtime, factory());
      bound = await settled(
        runtime,
        runtime.offlineEngine.catch((error: unknown) => {
          runtime.offlineEngine = undefined;
          throw error;
        }),
      );
      return await settled(runtime, op(bound.engine));
    } catch (error) {
      throw engineError(error, runtime, bound);
    }
  });
}
