/**
 * CPU accounting from /proc (Linux): the machine's busy share, and the CPU time of PostgreSQL's
 * backends serving the benchmark database (when the server runs on this machine). Elsewhere the
 * readings are undefined and the report says n/a.
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

/** user + system CPU of a process in µs, or undefined when /proc does not show it. */
export function processCpuMicros(pid: number): number | undefined {
  try {
    const stat = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    // fields[0] is field 3 (state); utime and stime are fields 14 and 15
    return ((Number(fields[11]) + Number(fields[12])) * 1e6) / clockTicks();
  } catch {
    return undefined;
  }
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
export function machineBusy(a: MachineSample | undefined, b: MachineSample | undefined): { busy: number; irq: number } | undefined {
  if (!a || !b || b.total === a.total) return undefined;
  return { busy: (b.busy - a.busy) / (b.total - a.total), irq: (b.irq - a.irq) / (b.total - a.total) };
}

/** CPU time of the backends connected to one database, via pg_stat_activity pids and /proc. */
export class BackendCpu {
  constructor(
    private readonly admin: pg.Client,
    private readonly database: string,
  ) {}

  async sample(): Promise<Map<number, number> | undefined> {
    const { rows } = await this.admin.query<{ pid: number }>('SELECT pid FROM pg_stat_activity WHERE datname = $1', [this.database]);
    const out = new Map<number, number>();
    for (const { pid } of rows) {
      const cpu = processCpuMicros(pid);
      if (cpu === undefined) return undefined; // not on this machine (or not visible)
      out.set(pid, cpu);
    }
    return out;
  }

  /** CPU µs spent between two samples; backends that appeared meanwhile count from zero. */
  static spent(before: Map<number, number> | undefined, after: Map<number, number> | undefined): number | undefined {
    if (!before || !after) return undefined;
    let sum = 0;
    for (const [pid, cpu] of after) sum += cpu - (before.get(pid) ?? 0);
    return sum;
  }
}
