import { it } from 'vitest';
import { loadService } from '../cli/project.ts';
import { startServer } from '../runtime/index.ts';
import { createTestDatabase } from './support/database.ts';
import { SHOP, MANAGEMENT_TOKEN } from './support/server.ts';
it('debug', async () => {
  const { service, config } = await loadService(SHOP);
  const database = await createTestDatabase();
  const server = await startServer({ projectDir: SHOP, service, config, databaseUrl: database.url, port: 0, host: '127.0.0.1', managementToken: MANAGEMENT_TOKEN, log: (m) => console.log('LOG', m) });
  const r = await fetch(server.url + '/gw/api/rest/_apikeys', { method: 'POST', headers: { 'x-project-id': 'shop', authorization: 'Bearer ' + MANAGEMENT_TOKEN, 'content-type': 'application/json' }, body: JSON.stringify({ name: 'a', prefix: 'Token', roles: ['admin'], environment: 'master' }) });
  const k = (await r.json()).data.key;
  for (const p of ['/gw/api/rest/City', '/gw/api/rest/City/1', '/gw/api/rest/City?limit=abc']) {
    const res = await fetch(server.url + p, { headers: { 'x-project-id': 'shop', authorization: 'Bearer ' + k } });
    console.log(p, res.status, await res.text());
  }
  await server.close(); await database.drop();
});
