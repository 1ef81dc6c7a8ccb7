/** The query layer's refusals as the REST API answers them: 400 for a query, 403 for a write. */
import { Problem } from '../http/index.ts';
import { QueryError, WriteRefused } from '../query/index.ts';

export function queryProblem(error: QueryError): Problem {
  return new Problem('invalid-parameter', `${error.parameter}: ${error.message}`, [
    { field: error.parameter, rule: 'filter', message: error.message },
  ]);
}

export function writeRefusedProblem(error: WriteRefused): Problem {
  return new Problem(
    'forbidden',
    error.message,
    error.fields.map((field) => ({
      field,
      rule: 'forbidden_field',
      message: `${field} may not be written by your role`,
    })),
  );
}

/** Runs a handler, answering the query layer's refusals as Problems. */
export async function answeringQueryErrors<T>(work: () => Promise<T>): Promise<T> {
  try {
    return await work();
  } catch (error) {
    throw asProblem(error);
  }
}

/** The Problem a query layer's refusal answers as; any other error as it is. */
export function asProblem(error: unknown): unknown {
  if (error instanceof QueryError) return queryProblem(error);
  if (error instanceof WriteRefused) return writeRefusedProblem(error);
  return error;
}
