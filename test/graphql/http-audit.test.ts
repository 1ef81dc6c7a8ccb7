// GraphQL over HTTP conformance of /gw/api/graphql: graphql-http's own audit suite (every MUST and
// SHOULD) run against our endpoint, through the real pipeline (project header and API key added to
// each of its requests, as any client of this server sends them).
import { serverAudits } from 'graphql-http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestServer, type TestServer } from '../support/server.ts';

let t: TestServer;
beforeAll(async () => {
  t = await startTestServer();
});
afterAll(() => t?.close());

/** Audits that cannot pass here, with the reason (none so far). */
const EXPECTED_TO_FAIL: Record<string, string> = {};

describe('graphql-http server audits', () => {
  it('every MUST and SHOULD audit passes', async () => {
    const fetchFn = (input: string | URL, init: RequestInit = {}) => {
      const headers = new Headers(init.headers);
      headers.set('x-project-id', t.config.project.id);
      headers.set('authorization', `Bearer ${t.adminKey}`);
      return fetch(input, { ...init, headers });
    };
    const audits = serverAudits({ url: `${t.url}/gw/api/graphql`, fetchFn });
    expect(audits.length).toBeGreaterThan(30);
    const failures: string[] = [];
    for (const audit of audits) {
      if (!audit.name.startsWith('MUST') && !audit.name.startsWith('SHOULD')) continue;
      const result = await audit.fn();
      if (result.status !== 'ok' && !(audit.name in EXPECTED_TO_FAIL)) failures.push(`${audit.name}: ${result.reason}`);
      if (result.status === 'ok' && audit.name in EXPECTED_TO_FAIL)
        failures.push(`${audit.name} now passes: drop it from EXPECTED_TO_FAIL`);
    }
    expect(failures).toEqual([]);
  });
});
