/**
 * CPU accounting from /proc (Linux): the machine's busy share, and the CPU time of PostgreSQL's
 * backends serving the benchmark database, parallel query workers included (when the server runs
 * on this machine). Elsewhere the readings are undefined and the report says n/a.
 */
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import type pg from 'pg';

let ticksPerSecond: number | undefined;
function clockTicks(): number {
  if (ticksPerSecond === undefined) {
    try {
      ticksPerSecond = Number(execFileSync('getconf', ['CLK_TCK'], { encoding: 'utf8' }).trim()) || 100;
    } catch {
      ticksPerSecond = 100;
    }
  }
  return ticksPerSecond;
}

/** The fields of /proc/<pid>/stat after the command name (index 0 is field 3, the state), or undefined. */
function procStat(pid: number): string[] | undefined {
  try {
    const stat = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
    return stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  } catch {
    return undefined;
  }
}

/** user + system CPU of a process in µs, or undefined when /proc does not show it. */
export function processCpuMicros(pid: number): number | undefined {
  const fields = procStat(pid);
  // utime and stime are fields 14 and 15
  return fields === undefined ? undefined : ((Number(fields[11]) + Number(fields[12])) * 1e6) / clockTicks();
}

function parentPid(pid: number): number | undefined {
  const fields = procStat(pid);
  return fields === undefined ? undefined : Number(fields[1]);
}

/** CPU of the waited-for (exited) children of a process (cutime + cstime, fields 16 and 17), µs. */
function reapedChildrenMicros(pid: number): number | undefined {
  const fields = procStat(pid);
  return fields === undefined ? undefined : ((Number(fields[13]) + Number(fields[14])) * 1e6) / clockTicks();
}

export interface MachineSample {
  busy: number;
  /** hardware and software interrupt time: loopback TCP is mostly processed here, charged to no process */
  irq: number;
  total: number;
}

export function machineSample(): MachineSample | undefined {
  try {
    const line = fs.readFileSync('/proc/stat', 'utf8').split('\n')[0]!;
    const [, ...values] = line.trim().split(/\s+/);
    const n = values.map(Number);
    const idle = (n[3] ?? 0) + (n[4] ?? 0);
    const total = n.slice(0, 8).reduce((a, b) => a + b, 0);
    return { busy: total - idle, irq: (n[5] ?? 0) + (n[6] ?? 0), total };
  } catch {
    return undefined;
  }
}

/** Busy and interrupt shares of all CPUs between two samples, 0..1. */
export function machineBusy(
  a: MachineSample | undefined,
  b: MachineSample | undefined,
): { busy: number; irq: number } | undefined {
  if (!a || !b || b.total === a.total) return undefined;
  return { busy: (b.busy - a.busy) / (b.total - a.total), irq: (b.irq - a.irq) / (b.total - a.total) };
}

export interface BackendSample {
  /** CPU µs of each live backend of the database */
  backends: Map<number, number>;
  /** CPU µs of the postmaster's exited children: the parallel query workers, which live for one
   *  query only (and any other short-lived child, such as an autovacuum worker) */
  reaped: number;
}

/**
 * CPU time of the backends connected to one database, via pg_stat_activity pids and /proc, plus
 * that of the server's exited children (parallel workers are gone before a sample sees them; the
 * postmaster's cutime/cstime collects their CPU when it reaps them).
 */
export class BackendCpu {
  private postmaster: number | undefined;

  constructor(
    private readonly admin: pg.Client,
    private readonly database: string,
  ) {}

  async sample(): Promise<BackendSample | undefined> {
    if (this.postmaster === undefined) {
      // the parent of any backend, here the admin connection's own
      const [own] = (await this.admin.query<{ pid: number }>('SELECT pg_backend_pid() AS pid')).rows;
      this.postmaster = parentPid(own!.pid);
      if (this.postmaster === undefined) return undefined; // not on this machine
    }
    const { rows } = await this.admin.query<{ pid: number }>(
      "SELECT pid FROM pg_stat_activity WHERE datname = $1 AND backend_type <> 'parallel worker'",
      [this.database],
    );
    const backends = new Map<number, number>();
    for (const { pid } of rows) {
      const cpu = processCpuMicros(pid);
      if (cpu === undefined) return undefined; // not on this machine (or not visible)
      backends.set(pid, cpu);
    }
    const reaped = reapedChildrenMicros(this.postmaster);
    if (reaped === undefined) return undefined;
    return { backends, reaped };
  }

  /**
   * CPU µs spent between two samples: backends that appeared meanwhile count from zero; those that
   * exited meanwhile are in the reaped total with all their CPU, of which the part before the first
   * sample is taken off again.
   */
  static spent(before: BackendSample | undefined, after: BackendSample | undefined): number | undefined {
    if (!before || !after) return undefined;
    let sum = after.reaped - before.reaped;
    for (const [pid, cpu] of after.backends) sum += cpu - (before.backends.get(pid) ?? 0);
    for (const [pid, cpu] of before.backends) if (!after.backends.has(pid)) sum -= cpu;
    return sum;
  }
}
