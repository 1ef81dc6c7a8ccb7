// A project served by svcgen may live anywhere (svcgen init /tmp/shop). Its generated code imports
// `svcgen/model`, `zod` and `@prisma/client`; when the project has no node_modules of its own,
// those resolve from svcgen's installation instead. In a checkout, `svcgen/*` means the TypeScript
// source (the "svcgen-source" condition of package.json's exports), not dist/.
const ROOT = new URL('../package.json', import.meta.url).href;
let fromSource = false;

export function initialize(data) {
  fromSource = Boolean(data?.fromSource);
}

export async function resolve(specifier, context, nextResolve) {
  if (fromSource && (specifier === 'svcgen' || specifier.startsWith('svcgen/'))) {
    context = { ...context, conditions: ['svcgen-source', ...context.conditions] };
  }
  try {
    return await nextResolve(specifier, context);
  } catch (error) {
    const bare = !specifier.startsWith('.') && !specifier.startsWith('/') && !/^[a-z]+:/i.test(specifier);
    if (!bare || context.parentURL === ROOT) throw error;
    return nextResolve(specifier, { ...context, parentURL: ROOT });
  }
}
