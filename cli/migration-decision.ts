/** What `migrate dev` does with a new migration given its warnings and the flags; and the y/N question. */
import { createInterface } from 'node:readline/promises';

export interface DecisionInput {
  hasWarnings: boolean;
  hasUnexecutable: boolean;
  interactive: boolean;
  acceptDataLoss: boolean;
  createOnly: boolean;
}

export type Decision =
  | { action: 'apply' }
  | { action: 'write-only' }
  | { action: 'ask' }
  | { action: 'refuse'; reason: 'data-loss' | 'unexecutable' };

export function decideMigration(input: DecisionInput): Decision {
  // Nothing runs with --create-only: the file is the user's to edit before it is applied.
  if (input.createOnly) return { action: 'write-only' };
  // No flag makes these steps possible; only a change of the SQL or of the model does.
  if (input.hasUnexecutable) return { action: 'refuse', reason: 'unexecutable' };
  if (!input.hasWarnings || input.acceptDataLoss) return { action: 'apply' };
  return input.interactive ? { action: 'ask' } : { action: 'refuse', reason: 'data-loss' };
}

/** y / yes (any case) is yes; anything else, an empty line included, is the default no. */
export function isYes(answer: string): boolean {
  return /^\s*y(es)?\s*$/i.test(answer);
}

/** Asks a y/N question on a terminal; false when the input ends without an answer. */
export async function askYesNo(
  question: string,
  io: { input: NodeJS.ReadableStream; output: NodeJS.WritableStream } = {
    input: process.stdin,
    output: process.stderr,
  },
): Promise<boolean> {
  const rl = createInterface({ input: io.input, output: io.output, terminal: false });
  try {
    const answer = await new Promise<string>((resolve) => {
      rl.once('close', () => resolve(''));
      rl.question(`${question} [y/N] `).then(resolve, () => resolve(''));
    });
    return isYes(answer);
  } finally {
    rl.close();
  }
}

export function isInteractive(): boolean {
  return Boolean(process.stdin.isTTY) && process.env.CI === undefined;
}
