import path from 'node:path';
import type { Command } from 'commander';
import { InvalidArgumentError } from 'commander';

export function withProject(command: Command): Command {
  return command.option('--project <dir>', 'the project folder', '.');
}

export function projectDir(options: { project?: string }): string {
  return path.resolve(options.project ?? '.');
}

export function parsePort(value: string): number {
  if (!/^\d{1,5}$/.test(value) || Number(value) > 65535) throw new InvalidArgumentError('must be a number from 0 to 65535');
  return Number(value);
}

export function collect(value: string, previous: string[] = []): string[] {
  return [...previous, value];
}
