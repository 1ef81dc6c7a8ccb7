/**
 * The typed client's side of the database functions (docs/own-code.md "Database functions"),
 * appended to generated/client.ts when the config has some: `FunctionClient`, one method per
 * function with its arguments and answer typed from the signature, and `createFunctionClient`.
 */
import {
  DATA_BASE_PATH,
  type FunctionReturns,
  type FunctionSpec,
  type FunctionType,
} from '../../runtime/model/index.ts';

function tsType(type: FunctionType, input: boolean): string {
  const one = (() => {
    switch (type.base) {
      case 'int2':
      case 'int4':
      case 'float4':
      case 'float8':
        return 'number';
      case 'int8':
      case 'numeric':
        return input ? 'number | string' : 'number';
      case 'bool':
        return 'boolean';
      case 'json':
      case 'jsonb':
        return 'unknown';
      case 'enum':
        return (type.enumValues ?? []).map((v) => `'${v.replace(/'/g, "\\'")}'`).join(' | ') || 'never';
      default:
        return 'string';
    }
  })();
  return type.array ? `(${one} | null)[] | null` : `${one} | null`;
}

function resultType(returns: FunctionReturns): string {
  switch (returns.kind) {
    case 'void':
      return 'null';
    case 'scalar':
      return returns.set ? `(${tsType(returns.type, false)})[]` : tsType(returns.type, false);
    case 'table':
    case 'rows':
      return `{ ${returns.columns.map((c) => `${JSON.stringify(c.name)}: ${c.type === 'other' ? 'unknown' : tsType(c.type, false)}`).join('; ')} }[]`;
  }
}

export function renderFunctionClient(functions: readonly FunctionSpec[]): string {
  if (functions.length === 0) return '';
  const methods = functions.map((f) => {
    const args = f.arguments.map((a) => `${JSON.stringify(a.name)}${a.hasDefault ? '?' : ''}: ${tsType(a.type, true)}`);
    const optional = f.arguments.every((a) => a.hasDefault) ? '?' : '';
    const shape = args.length > 0 ? `{ ${args.join('; ')} }` : 'Record<string, never>';
    return `  /** POST ${DATA_BASE_PATH}/rpc/${f.name} (${f.volatility.toUpperCase()}). */\n  ${f.name}(args${optional}: ${shape}, options?: CallOptions): Promise<DataResponse<${resultType(f.returns)}>>;`;
  });
  return `
// Database functions (docs/own-code.md "Database functions"); client.ts's import names what they use.

export interface FunctionClient {
${methods.join('\n')}
}

/** The database functions of this service: \`await createFunctionClient(options).${functions[0]!.name}({ ... })\`. */
export function createFunctionClient(options: ClientOptions): FunctionClient {
  return createFunctionMethods<FunctionClient>(options, '${DATA_BASE_PATH}', ${JSON.stringify(functions.map((f) => f.name)).replace(/"/g, "'")});
}
`;
}
