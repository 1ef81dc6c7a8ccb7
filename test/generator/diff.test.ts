/**
 * `svcgen diff`: the change lists of two models and of two configs (table-driven), and the
 * command itself (text, --json, config beside the schema or at a git ref, exit codes).
 */
import { execFile } from 'node:child_process';
import fs from 'node:fs/promises';
import path from 'node:path';
import { promisify } from 'node:util';
import { afterAll, describe, expect, it } from 'vitest';
import { diffConfigs, type ConfigChange } from '../../generator/diff/diff-config.ts';
import { diffGraphql, type GraphqlChange } from '../../generator/diff/diff-graphql.ts';
import { diffModels, type ApiChange } from '../../generator/diff/diff-models.ts';
import { reportLines, summarize } from '../../generator/diff/report.ts';
import { describeModel } from '../../generator/model/describe-model.ts';
import { readDmmf } from '../../generator/prisma/index.ts';
import { parseConfig, type Config } from '../../runtime/config/index.ts';
import type { TableSpec } from '../../runtime/model/index.ts';
import { cleanupCli, runCli, show, tempDir } from '../support/cli.ts';
import { IMPLICIT_M2M, JOIN_MODEL, M2M_REPORT, OPENED_REPORT, openAttachments } from '../support/change-reports.ts';
import { SHOP } from '../support/server.ts';

const run = promisify(execFile);

const BASE = `
datasource db {
  provider = "postgresql"
}
enum Status {
  open
  paid
}
model Order {
  id        Int      @id @default(autoincrement())
  status    Status   @default(open)
  total     Float
  note      String?
  tag       String   @default("x")
  items     Item[]
  createdAt DateTime @default(now())
  updatedAt DateTime @updatedAt
}
model Item {
  id        Int      @id @default(autoincrement())
  orderId   Int
  order     Order    @relation(fields: [orderId], references: [id])
  createdAt DateTime @default(now())
  updatedAt DateTime @updatedAt

  @@index([orderId])
}
`;

async function changes(after: string): Promise<Pick<ApiChange, 'kind' | 'subject' | 'breaking'>[]> {
  const model = async (text: string) => describeModel(await readDmmf(text));
  return diffModels(await model(BASE), await model(after)).map(({ kind, subject, breaking }) => ({
    kind,
    subject,
    breaking,
  }));
}

const edit = (from: string, to: string) => {
  if (!BASE.includes(from)) throw new Error(`the base schema has no "${from}"`);
  return BASE.replace(from, to);
};

const CASES: [string, { after: string; want: Pick<ApiChange, 'kind' | 'subject' | 'breaking'>[] }][] = [
  ['no change', { after: BASE, want: [] }],
  // Indexes only decide which reads are expensive (docs/config.md): no change to the API.
  [
    'indexes added',
    {
      after: edit(
        '  items     Item[]',
        '  items     Item[]\n  @@index([status, total(sort: Desc)])\n  @@index([note])',
      ),
      want: [],
    },
  ],
  ['an index removed', { after: edit('  @@index([orderId])\n', ''), want: [] }],
  [
    'optional field added',
    {
      after: edit('  note      String?', '  note      String?\n  memo      String?'),
      want: [{ kind: 'field added', subject: 'Order.memo', breaking: false }],
    },
  ],
  [
    'defaulted field added',
    {
      after: edit('  note      String?', '  note      String?\n  n Int @default(0)'),
      want: [{ kind: 'field added', subject: 'Order.n', breaking: false }],
    },
  ],
  [
    'required field added',
    {
      after: edit('  note      String?', '  note      String?\n  code      String'),
      want: [{ kind: 'field added', subject: 'Order.code', breaking: true }],
    },
  ],
  [
    'field removed',
    {
      after: edit('  note      String?\n', ''),
      want: [{ kind: 'field removed', subject: 'Order.note', breaking: true }],
    },
  ],
  [
    'type changed',
    {
      after: edit('  total     Float', '  total     Int'),
      want: [{ kind: 'type changed', subject: 'Order.total', breaking: true }],
    },
  ],
  [
    'nullable → required',
    {
      after: edit('  note      String?', '  note      String'),
      want: [{ kind: 'nullability changed', subject: 'Order.note', breaking: true }],
    },
  ],
  [
    'required → nullable',
    {
      after: edit('  total     Float', '  total     Float?'),
      want: [{ kind: 'nullability changed', subject: 'Order.total', breaking: true }],
    },
  ],
  [
    'default removed',
    {
      after: edit('  tag       String   @default("x")', '  tag       String'),
      want: [{ kind: 'nullability changed', subject: 'Order.tag', breaking: true }],
    },
  ],
  [
    'enum value added',
    {
      after: edit('  paid\n', '  paid\n  shipped\n'),
      want: [{ kind: 'enum value added', subject: 'Order.status', breaking: false }],
    },
  ],
  [
    'enum value removed',
    { after: edit('  paid\n', ''), want: [{ kind: 'enum value removed', subject: 'Order.status', breaking: true }] },
  ],
  [
    'table added',
    {
      after: `${BASE}\nmodel Tag {\n  id Int @id\n  createdAt DateTime @default(now())\n  updatedAt DateTime @updatedAt\n}\n`,
      want: [{ kind: 'table added', subject: 'Tag', breaking: false }],
    },
  ],
  [
    'table removed (with its relation)',
    {
      after: edit('  items     Item[]\n', '').replace(/model Item \{[\s\S]*?\n\}\n/, ''),
      want: [
        { kind: 'table removed', subject: 'Item', breaking: true },
        { kind: 'relation removed', subject: 'Order.items', breaking: true },
      ],
    },
  ],
];

describe('diffModels: file references (docs/storage.md)', () => {
  it('a reference added or moved to another bucket, or onDelete: delete added, is breaking; dropped or relaxed is not', async () => {
    const marked = (marker: string) => edit('  note      String?\n', `  /// ${marker}\n  note      String?\n`);
    expect(await changes(marked('@svcgen.file(attachments)'))).toEqual([
      { kind: 'file reference changed', subject: 'Order.note', breaking: true },
    ]);
    const model = async (text: string) => describeModel(await readDmmf(text));
    const between = async (a: string, b: string) =>
      diffModels(await model(marked(a)), await model(marked(b))).map(({ detail, breaking }) => ({ detail, breaking }));
    expect(await between('@svcgen.file(attachments)', '@svcgen.file(scans)')).toEqual([
      { detail: 'files of attachments → files of scans', breaking: true },
    ]);
    expect(await between('@svcgen.file(attachments)', '@svcgen.file(attachments, onDelete: delete)')).toEqual([
      { detail: 'files of attachments → files of attachments, onDelete: delete', breaking: true },
    ]);
    expect(await between('@svcgen.file(attachments, onDelete: delete)', '@svcgen.file(attachments)')).toEqual([
      { detail: 'files of attachments, onDelete: delete → files of attachments', breaking: false },
    ]);
    expect(await between('@svcgen.file(attachments)', 'nothing')).toEqual([
      { detail: 'files of attachments → no file reference', breaking: false },
    ]);
  });
});

describe('diffModels', () => {
  it.each(CASES)('%s', async (_, { after, want }) => {
    expect(await changes(after)).toEqual(want);
  });
});

describe('diffModels: a field type is printed as the schema spells it, ? and [] included', () => {
  const details = async (after: string) => {
    const model = async (text: string) => describeModel(await readDmmf(text));
    return diffModels(await model(BASE), await model(after)).map(({ kind, subject, detail }) => ({
      kind,
      subject,
      detail,
    }));
  };
  it.each<[string, string, Pick<ApiChange, 'kind' | 'subject' | 'detail'>[]]>([
    [
      'a nullable field removed',
      edit('  note      String?\n', ''),
      [{ kind: 'field removed', subject: 'Order.note', detail: 'String?' }],
    ],
    [
      'a list field added',
      edit('  note      String?', '  note      String?\n  labels    String[]'),
      [{ kind: 'field added', subject: 'Order.labels', detail: 'String[]' }],
    ],
    [
      'a nullable field with a native type added',
      edit('  note      String?', '  note      String?\n  code      String? @db.VarChar(3)'),
      [{ kind: 'field added', subject: 'Order.code', detail: 'String? @db.VarChar(3)' }],
    ],
    [
      'a nullable field changes type',
      edit('  note      String?', '  note      Int?'),
      [{ kind: 'type changed', subject: 'Order.note', detail: 'String? → Int?' }],
    ],
    [
      'nullable → required',
      edit('  note      String?', '  note      String'),
      [{ kind: 'nullability changed', subject: 'Order.note', detail: 'String? → String (nullable → required)' }],
    ],
    [
      'a required field added',
      edit('  note      String?', '  note      String?\n  code      Int'),
      [{ kind: 'field added', subject: 'Order.code', detail: 'Int, required on create' }],
    ],
  ])('%s', async (_, after, want) => {
    expect(await details(after)).toEqual(want);
  });
});

/** Expected GraphQL changes, as diffGraphql lists them. */
const breaking = (type: string, ...descriptions: string[]): GraphqlChange[] =>
  descriptions.map((description) => ({ type, description, breaking: true }));
const dangerous = (type: string, ...descriptions: string[]): GraphqlChange[] =>
  descriptions.map((description) => ({ type, description, breaking: false }));
const optionalAdded = (...members: [member: string, input: string][]) =>
  dangerous(
    'OPTIONAL_INPUT_FIELD_ADDED',
    ...members.map(([member, input]) => `An optional field ${member} on input type ${input} was added.`),
  );
/** A text field's members of an aggregate, in code-unit order as listed (`memo` before `min_memo`, `note` after). */
const aggregateMembers = (field: string) => [`count_distinct_${field}`, `max_${field}`, `min_${field}`, field].sort();
/** A nullable String field of Order removed: from the type and every input and enum that named it. */
const orderTextFieldRemoved = (field: string) => [
  ...breaking(
    'FIELD_REMOVED',
    `Order.${field} was removed.`,
    ...aggregateMembers(field).map((m) => `OrderAggregate.${m} was removed.`),
    ...aggregateMembers(field).map((m) => `OrderAggregateOrderBy.${m} was removed.`),
    `OrderCreateInput.${field} was removed.`,
    `OrderHaving.count_distinct_${field} was removed.`,
    `OrderOrderBy.${field} was removed.`,
    `OrderRecord.${field} was removed.`,
    `OrderUpdateInput.${field} was removed.`,
    `OrderWhere.${field} was removed.`,
  ),
  ...breaking('VALUE_REMOVED_FROM_ENUM', `${field} was removed from enum type OrderGroupField.`),
];
/** `memo String?` added to Order: nothing breaking, graphql-js's dangerous changes only. */
const ORDER_MEMO_ADDED = [
  ...optionalAdded(
    ['count_distinct_memo', 'OrderAggregateOrderBy'],
    ['count_distinct_memo', 'OrderHaving'],
    ['max_memo', 'OrderAggregateOrderBy'],
    ['memo', 'OrderAggregateOrderBy'],
    ['memo', 'OrderCreateInput'],
    ['memo', 'OrderOrderBy'],
    ['memo', 'OrderUpdateInput'],
    ['memo', 'OrderWhere'],
    ['min_memo', 'OrderAggregateOrderBy'],
  ),
  ...dangerous('VALUE_ADDED_TO_ENUM', 'memo was added to enum type OrderGroupField.'),
];

describe('diffGraphql: the GraphQL schema of each model (generated/schema.graphql), compared by graphql-js', () => {
  const graphqlChanges = async (before: string, after: string) => {
    const model = async (text: string) => describeModel(await readDmmf(text));
    return diffGraphql(await model(before), await model(after));
  };
  const withUuid = edit('  total     Float', '  ref       String?  @db.Uuid\n  total     Float');

  it.each<[string, string, string, { type: string; description: string; breaking: boolean }[]]>([
    ['no change', BASE, BASE, []],
    [
      'a field removed: from the type and every input and enum that named it',
      BASE,
      edit('  note      String?\n', ''),
      orderTextFieldRemoved('note'),
    ],
    [
      // The SDL shows every create input member as optional (the REST validators check them), so
      // graphql-js alone would call this dangerous only.
      'a required field added: a create must now send it',
      BASE,
      edit('  note      String?', '  note      String?\n  code      String'),
      [
        ...breaking(
          'REQUIRED_INPUT_FIELD_ADDED',
          'A create must now send OrderCreateInput.code (a create without it is refused).',
        ),
        ...optionalAdded(
          ['code', 'OrderAggregateOrderBy'],
          ['code', 'OrderOrderBy'],
          ['code', 'OrderUpdateInput'],
          ['code', 'OrderWhere'],
          ['count_distinct_code', 'OrderAggregateOrderBy'],
          ['count_distinct_code', 'OrderHaving'],
          ['max_code', 'OrderAggregateOrderBy'],
          ['min_code', 'OrderAggregateOrderBy'],
        ),
        ...dangerous('VALUE_ADDED_TO_ENUM', 'code was added to enum type OrderGroupField.'),
      ],
    ],
    [
      'an optional field made required: a create must now send it',
      BASE,
      edit('  note      String?', '  note      String'),
      breaking(
        'INPUT_FIELD_NOW_REQUIRED',
        'A create must now send OrderCreateInput.note, which it could leave out before.',
      ),
    ],
    [
      // Record fields are nullable in the schema (a row a role may write but not read answers null):
      // nothing for GraphQL to flag; the model diff says it (nullability changed, breaking).
      'a required field made nullable: the same schema',
      BASE,
      edit('  total     Float', '  total     Float?'),
      [],
    ],
    [
      'a model removed: its types and root fields',
      BASE,
      edit('  items     Item[]\n', '').replace(/model Item \{[\s\S]*?\n\}\n/, ''),
      [
        ...breaking(
          'FIELD_REMOVED',
          ...['createItem', 'createItemMany', 'deleteItem', 'deleteItemWhere', 'updateItem', 'updateItemWhere'].map(
            (f) => `Mutation.${f} was removed.`,
          ),
          'Order.items was removed.',
          'OrderWhere.items was removed.',
          ...['item', 'itemAggregate', 'itemList', 'itemPage'].map((f) => `Query.${f} was removed.`),
          'Subscription.itemChanged was removed.',
        ),
        ...breaking(
          'TYPE_REMOVED',
          ...[
            '',
            'Aggregate',
            'AggregateOrderBy',
            'Change',
            'CreateInput',
            'GroupField',
            'Having',
            'OrderBy',
            'Page',
            'Record',
          ].map((t) => `Item${t} was removed.`),
          'ItemUpdateInput was removed.',
          'ItemWhere was removed.',
        ),
      ],
    ],
    [
      'an enum value renamed: the old one removed (breaking), the new one added (dangerous)',
      BASE,
      edit('  paid\n', '  settled\n'),
      [
        ...breaking('VALUE_REMOVED_FROM_ENUM', 'paid was removed from enum type Status.'),
        ...dangerous('VALUE_ADDED_TO_ENUM', 'settled was added to enum type Status.'),
      ],
    ],
    [
      'an optional field added: nothing breaking',
      BASE,
      edit('  note      String?', '  note      String?\n  memo      String?'),
      ORDER_MEMO_ADDED,
    ],
    [
      // Filter input names depend on the field's own type, never on which String field came first.
      'a uuid field removed: the other String fields keep their filter type',
      withUuid,
      BASE,
      [
        ...breaking(
          'FIELD_REMOVED',
          'Order.ref was removed.',
          'OrderAggregate.count_distinct_ref was removed.',
          'OrderAggregate.ref was removed.',
          'OrderAggregateOrderBy.count_distinct_ref was removed.',
          'OrderAggregateOrderBy.ref was removed.',
          'OrderCreateInput.ref was removed.',
          'OrderHaving.count_distinct_ref was removed.',
          'OrderOrderBy.ref was removed.',
          'OrderRecord.ref was removed.',
          'OrderUpdateInput.ref was removed.',
          'OrderWhere.ref was removed.',
        ),
        ...breaking('TYPE_REMOVED', 'StringUuidFilter was removed.'),
        ...breaking('VALUE_REMOVED_FROM_ENUM', 'ref was removed from enum type OrderGroupField.'),
      ],
    ],
  ])('%s', async (_, before, after, want) => {
    expect(await graphqlChanges(before, after)).toEqual(want);
  });

  it('reports GraphQL changes under their own heading, counted in the summary and the exit decision', () => {
    const graphql = [
      { type: 'FIELD_REMOVED', description: 'Order.note was removed.', breaking: true },
      { type: 'VALUE_ADDED_TO_ENUM', description: 'memo was added to enum type OrderGroupField.', breaking: false },
    ];
    expect(reportLines([], graphql)).toEqual([
      'GraphQL:',
      'BREAKING  FIELD_REMOVED        Order.note was removed.',
      '          VALUE_ADDED_TO_ENUM  memo was added to enum type OrderGroupField.',
      '2 changes (2 in the GraphQL schema), 1 breaking, 0 widening access',
    ]);
    expect(summarize([], graphql)).toEqual({ breaking: 1, widens: 0 });
    expect(reportLines([], [])).toEqual(['no API changes']);
  });
});

/** The example's model and config, and a function that edits a copy of the config. */
async function shop(): Promise<{ tables: TableSpec[]; raw: Record<string, any>; parse: (raw: unknown) => Config }> {
  const tables = describeModel(await readDmmf(await fs.readFile(path.join(SHOP, 'schema.prisma'), 'utf8')));
  const raw = JSON.parse(await fs.readFile(path.join(SHOP, 'svcgen.config.json'), 'utf8'));
  const fields = Object.fromEntries(tables.map((t) => [t.name, t.fields.map((f) => f.name)]));
  return { tables, raw, parse: (value) => parseConfig(value, 'svcgen.config.json', fields) };
}

type Edit = (config: Record<string, any>) => void;
type Want = Pick<ConfigChange, 'kind' | 'subject' | 'detail' | 'access' | 'breaking'>;

/** `before` edits the example's config into the earlier one; `after` edits a copy of that into the later one. */
const CONFIG_CASES: [string, { before?: Edit; after: Edit; want: Want[] }][] = [
  [
    'same rules in another spelling: key order, defaults written out, a field list naming every field',
    {
      after: (c) => {
        c.roles.customer.tables.Order.update.filter = { status: 'open', customerId: '$user.id' };
        c.auth = { jwe: false, defaultRole: 'customer', lockout: { duration: 900 } };
        c.roles.customer.tables.City = {
          read: { fields: ['id', 'name', 'country', 'createdAt', 'updatedAt'], filter: {} },
        };
        c.roles.catalog.signup = false;
      },
      want: [],
    },
  ],
  [
    "a role's * entry: listed for each table the role does not name",
    {
      after: (c) => {
        c.roles.catalog.tables['*'] = { read: true };
      },
      want: ['Customer', 'Order', 'OrderItem'].map((t) => ({
        kind: 'grant added',
        subject: `catalog: ${t}.read`,
        detail: 'all rows, all fields (via *)',
        access: 'widens',
        breaking: false,
      })),
    },
  ],
  [
    "naming a table replaces the role's * entry for it, every action",
    {
      after: (c) => {
        c.roles.admin.tables.City = { read: true, update: true };
      },
      want: [
        {
          kind: 'grant removed',
          subject: 'admin: City.create',
          detail: 'all rows, all fields (via *)',
          access: 'narrows',
          breaking: true,
        },
        {
          kind: 'grant removed',
          subject: 'admin: City.delete',
          detail: 'all rows (via *)',
          access: 'narrows',
          breaking: true,
        },
      ],
    },
  ],
  [
    'a filter value changed counts as wider (values are not compared)',
    {
      after: (c) => {
        c.roles.customer.tables.Order.update.filter.status = { in: ['open'] };
      },
      want: [
        {
          kind: 'row filter changed',
          subject: 'customer: Order.update',
          detail: '{"customerId":"$user.id","status":"open"} → {"customerId":"$user.id","status":{"in":["open"]}}',
          access: 'widens',
          breaking: false,
        },
      ],
    },
  ],
  [
    'a filter with another entry in place of one counts as wider',
    {
      after: (c) => {
        c.roles.customer.tables.Order.update.filter = { customerId: '$user.id', total: { lte: 100 } };
      },
      want: [
        {
          kind: 'row filter changed',
          subject: 'customer: Order.update',
          detail: '{"customerId":"$user.id","status":"open"} → {"customerId":"$user.id","total":{"lte":100}}',
          access: 'widens',
          breaking: false,
        },
      ],
    },
  ],
  [
    'a preset moved to another variable ({ "equals": ... } is a preset too)',
    {
      after: (c) => {
        c.roles.customer.tables.Order.create.filter = { customerId: { equals: '$context.customer' } };
      },
      want: [
        {
          kind: 'row filter changed',
          subject: 'customer: Order.create',
          detail: '{"customerId":"$user.id"} → {"customerId":{"equals":"$context.customer"}}',
          access: 'widens',
          breaking: false,
        },
        {
          kind: 'preset changed',
          subject: 'customer: Order.create',
          detail: 'customerId: $user.id → $context.customer',
          access: 'neutral',
          breaking: true,
        },
      ],
    },
  ],
  [
    'a preset added with its filter entry: narrower, and the field is filled in',
    {
      after: (c) => {
        c.roles.customer.tables.Order.create.filter.note = '$user.email';
      },
      want: [
        {
          kind: 'row filter changed',
          subject: 'customer: Order.create',
          detail: '{"customerId":"$user.id"} → {"customerId":"$user.id","note":"$user.email"}',
          access: 'narrows',
          breaking: true,
        },
        {
          kind: 'preset added',
          subject: 'customer: Order.create',
          detail: 'note = $user.email when a create leaves it out',
          access: 'neutral',
          breaking: false,
        },
      ],
    },
  ],
  [
    'delete takes no field list: granting it names rows only, and its fields change nothing',
    {
      before: (c) => {
        c.roles.catalog.tables.Product.delete = { fields: ['id'] };
      },
      after: (c) => {
        c.roles.customer.tables.Order.delete = { filter: { customerId: '$user.id' } };
        c.roles.catalog.tables.Product.delete = { fields: ['sku'] };
      },
      want: [
        {
          kind: 'grant added',
          subject: 'customer: Order.delete',
          detail: 'rows where {"customerId":"$user.id"}',
          access: 'widens',
          breaking: false,
        },
      ],
    },
  ],
  [
    'a role that grants nothing comes and goes without effect; signup closed narrows',
    {
      before: (c) => {
        c.roles.old = {};
      },
      after: (c) => {
        delete c.roles.old;
        c.roles.fresh = { tables: { City: { read: false } } };
        c.roles.customer.signup = false;
        c.auth.defaultRole = undefined;
      },
      want: [
        {
          kind: 'role signup changed',
          subject: 'role customer',
          detail: 'no longer open to signup',
          access: 'narrows',
          breaking: true,
        },
        { kind: 'role added', subject: 'role fresh', detail: 'grants nothing', access: 'neutral', breaking: false },
        { kind: 'role removed', subject: 'role old', detail: 'granted nothing', access: 'neutral', breaking: false },
        {
          kind: 'setting changed',
          subject: 'auth.defaultRole',
          detail: '"customer" → (unset)',
          access: 'narrows',
          breaking: true,
        },
      ],
    },
  ],
  [
    'auth off, fewer auth environments, e-mail verification back on',
    {
      before: (c) => {
        c.auth.emailVerification = false;
      },
      after: (c) => {
        c.auth.enabled = false;
        c.auth.emailVerification = true;
        c.auth.environments = ['master'];
      },
      want: [
        { kind: 'setting changed', subject: 'auth.enabled', detail: 'true → false', access: 'narrows', breaking: true },
        {
          kind: 'setting changed',
          subject: 'auth.emailVerification',
          detail: 'false → true',
          access: 'narrows',
          breaking: true,
        },
        {
          kind: 'setting changed',
          subject: 'auth.environments',
          detail: '(unset) → ["master"]',
          access: 'narrows',
          breaking: true,
        },
      ],
    },
  ],
  [
    'an origin swapped for another widens and breaks; secrets are not printed',
    {
      before: (c) => {
        c.cors = { origins: ['https://a.example'] };
        c.mail = { smtpUrl: 'smtp://user:old-password@mail.example' };
      },
      after: (c) => {
        c.cors = { origins: ['https://b.example'], credentials: true };
        c.mail = { smtpUrl: 'smtp://user:new-password@mail.example' };
      },
      want: [
        {
          kind: 'setting changed',
          subject: 'mail.smtpUrl',
          detail: '(set) → (set, changed)',
          access: 'neutral',
          breaking: false,
        },
        {
          kind: 'setting changed',
          subject: 'cors.origins',
          detail: '["https://a.example"] → ["https://b.example"]',
          access: 'widens',
          breaking: true,
        },
        {
          kind: 'setting changed',
          subject: 'cors.credentials',
          detail: 'false → true',
          access: 'widens',
          breaking: false,
        },
      ],
    },
  ],
  // Bucket rules are access (docs/storage.md "Permissions"), classified as a table's rules are.
  [
    'a bucket made public and its owner filter dropped widens access',
    {
      after: (c) => {
        c.storage.buckets.attachments.public = true;
        c.storage.buckets.attachments.roles.customer.read = true;
      },
      want: [
        {
          kind: 'bucket made public',
          subject: 'bucket attachments',
          detail: "anyone may read a file's metadata and bytes by id, without credentials",
          access: 'widens',
          breaking: false,
        },
        {
          kind: 'row filter removed',
          subject: 'customer: bucket attachments.read',
          detail: 'was rows where {"ownerId":"$user.id"}: now all rows',
          access: 'widens',
          breaking: false,
        },
      ],
    },
  ],
  [
    'a bucket rule granted, a filter loosened, its preset moved: as for a table',
    {
      after: (c) => {
        c.storage.buckets.attachments.roles.catalog = { read: { filter: { contentType: 'image/png' } } };
        c.storage.buckets.attachments.roles.customer.create = { filter: { ownerId: '$context.userId' } };
      },
      want: [
        {
          kind: 'grant added',
          subject: 'catalog: bucket attachments.read',
          detail: 'rows where {"contentType":"image/png"}',
          access: 'widens',
          breaking: false,
        },
        {
          kind: 'row filter changed',
          subject: 'customer: bucket attachments.create',
          detail: '{"ownerId":"$user.id"} → {"ownerId":"$context.userId"}',
          access: 'widens',
          breaking: false,
        },
        {
          kind: 'preset changed',
          subject: 'customer: bucket attachments.create',
          detail: 'ownerId: $user.id → $context.userId',
          access: 'neutral',
          breaking: true,
        },
      ],
    },
  ],
  [
    'a bucket made private, a filter narrowed, a grant removed: narrowing (breaking), as for a table',
    {
      before: (c) => {
        c.storage.buckets.attachments.public = true;
      },
      after: (c) => {
        c.storage.buckets.attachments.public = false;
        c.storage.buckets.attachments.roles.customer.read.filter.contentType = 'application/pdf';
        delete c.storage.buckets.attachments.roles.customer.delete;
      },
      want: [
        {
          kind: 'bucket made private',
          subject: 'bucket attachments',
          detail: 'reading a file by id now needs a role that may read it',
          access: 'narrows',
          breaking: true,
        },
        {
          kind: 'row filter changed',
          subject: 'customer: bucket attachments.read',
          detail: '{"ownerId":"$user.id"} → {"contentType":"application/pdf","ownerId":"$user.id"}',
          access: 'narrows',
          breaking: true,
        },
        {
          kind: 'grant removed',
          subject: 'customer: bucket attachments.delete',
          detail: 'rows where {"ownerId":"$user.id"}',
          access: 'narrows',
          breaking: true,
        },
      ],
    },
  ],
  [
    "buckets added and removed; a bucket's sizes and types are settings; a new role's bucket rules are what it grants",
    {
      before: (c) => {
        c.storage.buckets.scratch = {};
      },
      after: (c) => {
        delete c.storage.buckets.scratch;
        c.storage.buckets.avatars = { public: true, roles: { customer: { create: true } } };
        c.storage.buckets.attachments.maxBytes = 1024;
        c.storage.buckets.attachments.roles.uploader = { create: true };
        c.roles.uploader = {};
      },
      want: [
        {
          kind: 'role added',
          subject: 'role uploader',
          detail: 'grants files in attachments: create',
          access: 'widens',
          breaking: false,
        },
        {
          kind: 'setting changed',
          subject: 'storage.buckets.attachments.maxBytes',
          detail: '10485760 → 1024',
          access: 'neutral',
          breaking: false,
        },
        {
          kind: 'bucket added',
          subject: 'bucket avatars',
          detail: 'public; customer: create',
          access: 'widens',
          breaking: false,
        },
        {
          kind: 'bucket removed',
          subject: 'bucket scratch',
          detail: 'was not public; no role may use it',
          access: 'neutral',
          breaking: false,
        },
      ],
    },
  ],
];

describe('diffConfigs', () => {
  it.each(CONFIG_CASES)('%s', async (_, { before, after, want }) => {
    const { tables, raw, parse } = await shop();
    const was = structuredClone(raw);
    before?.(was);
    const now = structuredClone(raw);
    before?.(now);
    after(now);
    const got = diffConfigs(parse(JSON.parse(JSON.stringify(was))), parse(JSON.parse(JSON.stringify(now))), tables);
    expect(
      got.map(({ kind, subject, detail, access, breaking }) => ({ kind, subject, detail, access, breaking })),
    ).toEqual(want);
  });
});

describe('svcgen diff', () => {
  afterAll(cleanupCli);

  /** `<root>/<name>/` with the example's schema.prisma and svcgen.config.json, each edited. */
  async function project(
    root: string,
    name: string,
    edits: { config?: Edit; schema?: (text: string) => string } = {},
  ): Promise<string> {
    const dir = path.join(root, name);
    await fs.mkdir(dir, { recursive: true });
    const schema = await fs.readFile(path.join(SHOP, 'schema.prisma'), 'utf8');
    await fs.writeFile(path.join(dir, 'schema.prisma'), edits.schema ? edits.schema(schema) : schema);
    const config = JSON.parse(await fs.readFile(path.join(SHOP, 'svcgen.config.json'), 'utf8'));
    edits.config?.(config);
    await fs.writeFile(path.join(dir, 'svcgen.config.json'), `${JSON.stringify(config, null, 2)}\n`);
    return dir;
  }
  const replacing = (from: string, to: string) => (text: string) => {
    if (!text.includes(from)) throw new Error(`the example's schema has no "${from}"`);
    return text.replace(from, to);
  };
  const diff = (args: string[]) => runCli(['diff', ...args]);
  const json = (stdout: string) =>
    JSON.parse(stdout) as {
      changes: (ApiChange | ConfigChange)[];
      graphql: GraphqlChange[];
      breaking: number;
      widens: number;
      config: { from: string; to: string } | null;
    };

  it('lists every kind of permission and setting change, marked, in text and --json; exit 1 as some are breaking', {
    timeout: 120_000,
  }, async () => {
    const root = await tempDir('diff');
    const before = await project(root, 'before', {
      config: (c) => void (c.roles.legacy = { tables: { City: { read: true } } }),
    });
    const after = await project(root, 'after', {
      config: (c) => {
        const roles = c.roles;
        roles.support = { tables: { Customer: { read: { fields: ['id', 'email', 'name'] } } } };
        roles.admin.tables.OrderItem = { read: true };
        roles.catalog.signup = true;
        roles.catalog.tables.Product.update = { filter: { tags: { has: 'sync' } } };
        const order = roles.customer.tables.Order;
        order.read.fields.push('note');
        order.read.filter = { status: { in: ['open', 'paid'] }, customerId: '$user.id' };
        delete order.create.filter;
        order.update = { filter: { customerId: '$user.id' }, fields: ['total'] };
        order.delete = { filter: { customerId: '$user.id', status: 'open' } };
        delete roles.customer.tables.City;
        roles.customer.tables.Product = { read: { fields: ['id', 'sku', 'title', 'price'] } };
        roles.customer.tables.Customer = { read: { filter: { id: { equals: '$user.id' } } } };
        c.auth.defaultRole = 'support';
        c.auth.emailVerification = false;
        c.auth.accessTokenTtl = 600;
        c.rateLimits = { loginPerMinutePerIp: 30 };
        c.webhooks = { timeoutMs: 8000, allowPrivateTargets: true };
        c.cors = { origins: ['https://shop.example'] };
        c.metrics = { token: 'a-secret-token-0123456789' };
      },
    });
    const from = path.join(before, 'schema.prisma');
    const text = await diff(['--project', after, '--from', from]);
    expect(text.code, show(text)).toBe(1);
    expect(text.stderr).toBe('');
    expect(text.stdout).toBe(
      [
        'BREAKING       grant removed        admin: OrderItem.create  all rows, all fields (via *)',
        'BREAKING       grant removed        admin: OrderItem.update  all rows, all fields (via *)',
        'BREAKING       grant removed        admin: OrderItem.delete  all rows (via *)',
        'WIDENS ACCESS  role signup changed  role catalog  now open to signup (roleId)',
        'BREAKING       row filter added     catalog: Product.update  rows where {"tags":{"has":"sync"}}',
        'BREAKING       grant removed        customer: City.read  all rows, all fields',
        'WIDENS ACCESS  grant added          customer: Customer.read  rows where {"id":{"equals":"$user.id"}}, all fields',
        'WIDENS ACCESS  fields widened       customer: Order.read  adds note',
        'BREAKING       row filter changed   customer: Order.read  {"customerId":"$user.id"} → {"customerId":"$user.id","status":{"in":["open","paid"]}}',
        'WIDENS ACCESS  row filter removed   customer: Order.create  was rows where {"customerId":"$user.id"}: now all rows',
        'BREAKING       preset removed       customer: Order.create  customerId (was $user.id): a create that leaves it out no longer gets it filled',
        'WIDENS ACCESS  row filter changed   customer: Order.update  {"customerId":"$user.id","status":"open"} → {"customerId":"$user.id"}',
        'WIDENS ACCESS  grant added          customer: Order.delete  rows where {"customerId":"$user.id","status":"open"}',
        'BREAKING       fields narrowed      customer: Product.read  drops stock, tags, createdAt, updatedAt',
        'BREAKING       role removed         role legacy  granted City: read',
        'WIDENS ACCESS  role added           role support  grants Customer: read',
        'WIDENS ACCESS  setting changed      auth.emailVerification  true → false',
        '               setting changed      auth.accessTokenTtl  900 → 600',
        'WIDENS ACCESS  setting changed      auth.defaultRole  "customer" → "support"',
        '               setting changed      rateLimits.loginPerMinutePerIp  20 → 30',
        '               setting changed      webhooks.timeoutMs  5000 → 8000',
        'WIDENS ACCESS  setting changed      webhooks.allowPrivateTargets  false → true',
        'WIDENS ACCESS  setting changed      cors.origins  [] → ["https://shop.example"]',
        '               setting changed      metrics.token  (unset) → (set)',
        '24 changes, 9 breaking, 11 widening access',
        '',
      ].join('\n'),
    );
    expect(text.stdout).not.toContain('a-secret-token');

    const out = await diff(['--project', after, '--from', from, '--json']);
    expect(out.code, show(out)).toBe(1);
    const report = json(out.stdout);
    expect(report.breaking).toBe(9);
    expect(report.widens).toBe(11);
    expect(report.graphql).toEqual([]);
    expect(report.config).toEqual({
      from: path.join(before, 'svcgen.config.json'),
      to: path.join(after, 'svcgen.config.json'),
    });
    // The same changes as the text, each with its access effect.
    expect(report.changes.map((c) => [c.kind, c.subject, (c as ConfigChange).access, c.breaking])).toEqual([
      ['grant removed', 'admin: OrderItem.create', 'narrows', true],
      ['grant removed', 'admin: OrderItem.update', 'narrows', true],
      ['grant removed', 'admin: OrderItem.delete', 'narrows', true],
      ['role signup changed', 'role catalog', 'widens', false],
      ['row filter added', 'catalog: Product.update', 'narrows', true],
      ['grant removed', 'customer: City.read', 'narrows', true],
      ['grant added', 'customer: Customer.read', 'widens', false],
      ['fields widened', 'customer: Order.read', 'widens', false],
      ['row filter changed', 'customer: Order.read', 'narrows', true],
      ['row filter removed', 'customer: Order.create', 'widens', false],
      ['preset removed', 'customer: Order.create', 'neutral', true],
      ['row filter changed', 'customer: Order.update', 'widens', false],
      ['grant added', 'customer: Order.delete', 'widens', false],
      ['fields narrowed', 'customer: Product.read', 'narrows', true],
      ['role removed', 'role legacy', 'narrows', true],
      ['role added', 'role support', 'widens', false],
      ['setting changed', 'auth.emailVerification', 'widens', false],
      ['setting changed', 'auth.accessTokenTtl', 'neutral', false],
      ['setting changed', 'auth.defaultRole', 'widens', false],
      ['setting changed', 'rateLimits.loginPerMinutePerIp', 'neutral', false],
      ['setting changed', 'webhooks.timeoutMs', 'neutral', false],
      ['setting changed', 'webhooks.allowPrivateTargets', 'widens', false],
      ['setting changed', 'cors.origins', 'widens', false],
      ['setting changed', 'metrics.token', 'neutral', false],
    ]);
    expect(report.changes[6]).toEqual({
      kind: 'grant added',
      subject: 'customer: Customer.read',
      detail: 'rows where {"id":{"equals":"$user.id"}}, all fields',
      breaking: false,
      access: 'widens',
    });
    expect(out.stdout).not.toContain('a-secret-token');
  });

  it('widening access exits 0 unless --fail-on-widen; narrowing exits 1 unless --allow-breaking', {
    timeout: 120_000,
  }, async () => {
    const root = await tempDir('diff');
    const before = path.join(await project(root, 'before'), 'schema.prisma');
    const widened = await project(root, 'widened', {
      config: (c) => void (c.roles.customer.tables.Order.delete = { filter: { customerId: '$user.id' } }),
    });
    const widening = await diff(['--project', widened, '--from', before]);
    expect(widening.code, show(widening)).toBe(0);
    expect(widening.stdout).toBe(
      'WIDENS ACCESS  grant added  customer: Order.delete  rows where {"customerId":"$user.id"}\n1 change, 0 breaking, 1 widening access\n',
    );
    const gated = await diff(['--project', widened, '--from', before, '--fail-on-widen', '--json']);
    expect(gated.code, show(gated)).toBe(1);
    expect(json(gated.stdout)).toMatchObject({
      breaking: 0,
      widens: 1,
      changes: [{ kind: 'grant added', access: 'widens', breaking: false }],
    });

    const narrowed = await project(root, 'narrowed', {
      config: (c) => void (c.roles.customer.tables.Order.update.fields = []),
    });
    const narrowing = await diff(['--project', narrowed, '--from', before]);
    expect(narrowing.code, show(narrowing)).toBe(1);
    expect(narrowing.stdout).toBe(
      'BREAKING  fields narrowed  customer: Order.update  drops total\n1 change, 1 breaking, 0 widening access\n',
    );
    expect((await diff(['--project', narrowed, '--from', before, '--allow-breaking'])).code).toBe(0);
    // --fail-on-widen does not let a break through, and --allow-breaking does not let a widening through.
    expect((await diff(['--project', narrowed, '--from', before, '--fail-on-widen'])).code).toBe(1);
    expect((await diff(['--project', widened, '--from', before, '--allow-breaking', '--fail-on-widen'])).code).toBe(1);
  });

  it('prints field types with ? and [] (a removed Int? field is Int?), in text and --json', {
    timeout: 120_000,
  }, async () => {
    const root = await tempDir('diff');
    const before = await project(root, 'before', {
      schema: (s) =>
        replacing(
          '  tags      String[]\n',
          '',
        )(replacing('  note       String?\n', '  note       String?\n  points     Int?\n')(s)),
    });
    const from = path.join(before, 'schema.prisma');
    const text = await diff(['--project', SHOP, '--from', from]);
    expect(text.code, show(text)).toBe(1);
    // The model's changes, then the GraphQL schema's (listed in full by the diffGraphql tests).
    const lines = text.stdout.split('\n');
    expect(lines.slice(0, 4)).toEqual([
      'BREAKING  field removed  Order.points  Int?',
      '          field added    Product.tags  String[]',
      'GraphQL:',
      'BREAKING  FIELD_REMOVED               Order.points was removed.',
    ]);
    expect(lines.slice(-6)).toEqual([
      'BREAKING  VALUE_REMOVED_FROM_ENUM     points was removed from enum type OrderGroupField.',
      '          OPTIONAL_INPUT_FIELD_ADDED  An optional field tags on input type ProductCreateInput was added.',
      '          OPTIONAL_INPUT_FIELD_ADDED  An optional field tags on input type ProductUpdateInput was added.',
      '          OPTIONAL_INPUT_FIELD_ADDED  An optional field tags on input type ProductWhere was added.',
      '29 changes (27 in the GraphQL schema), 25 breaking, 0 widening access',
      '',
    ]);
    const out = json((await diff(['--project', SHOP, '--from', from, '--json'])).stdout);
    expect(out.changes).toEqual([
      { kind: 'field removed', subject: 'Order.points', detail: 'Int?', breaking: true },
      { kind: 'field added', subject: 'Product.tags', detail: 'String[]', breaking: false },
    ]);
  });

  it('lists the GraphQL schema changes under GraphQL:, in text and --json; a breaking one exits 1 as a REST one does', {
    timeout: 120_000,
  }, async () => {
    const root = await tempDir('diff');
    // The earlier version spelled an enum value differently: renaming it back removes one value and adds one.
    const before = await project(root, 'before', { schema: replacing('  cancelled\n', '  canceled\n') });
    const from = path.join(before, 'schema.prisma');
    const text = await diff(['--project', SHOP, '--from', from]);
    expect(text.code, show(text)).toBe(1);
    expect(text.stderr).toBe('');
    expect(text.stdout).toBe(
      [
        '          enum value added    Order.status  cancelled',
        'BREAKING  enum value removed  Order.status  canceled',
        'GraphQL:',
        'BREAKING  VALUE_REMOVED_FROM_ENUM  canceled was removed from enum type OrderStatus.',
        '          VALUE_ADDED_TO_ENUM      cancelled was added to enum type OrderStatus.',
        '4 changes (2 in the GraphQL schema), 2 breaking, 0 widening access',
        '',
      ].join('\n'),
    );
    const out = await diff(['--project', SHOP, '--from', from, '--json']);
    expect(out.code, show(out)).toBe(1);
    expect(json(out.stdout)).toEqual({
      changes: [
        { kind: 'enum value added', subject: 'Order.status', detail: 'cancelled', breaking: false },
        { kind: 'enum value removed', subject: 'Order.status', detail: 'canceled', breaking: true },
      ],
      graphql: [
        {
          type: 'VALUE_REMOVED_FROM_ENUM',
          description: 'canceled was removed from enum type OrderStatus.',
          breaking: true,
        },
        { type: 'VALUE_ADDED_TO_ENUM', description: 'cancelled was added to enum type OrderStatus.', breaking: false },
      ],
      breaking: 2,
      widens: 0,
      config: { from: path.join(before, 'svcgen.config.json'), to: path.join(SHOP, 'svcgen.config.json') },
    });
    expect((await diff(['--project', SHOP, '--from', from, '--allow-breaking'])).code).toBe(0);
  });

  it('a schema file without a config beside it: models only, said on stderr; --from-config names one', {
    timeout: 120_000,
  }, async () => {
    const root = await tempDir('diff');
    const current = await fs.readFile(path.join(SHOP, 'schema.prisma'), 'utf8');
    const old = path.join(root, 'old.prisma');
    await fs.writeFile(
      old,
      current.replace('  note       String?\n', '').replace('  vip       Boolean  @default(false)\n', ''),
    );
    const additions = await diff(['--project', SHOP, '--from', old]);
    expect(additions.code, show(additions)).toBe(0);
    expect(additions.stdout).toMatch(/^\s+field added\s+Customer\.vip\s+Boolean$/m);
    expect(additions.stdout).toMatch(/^\s+field added\s+Order\.note\s+String\?$/m);
    expect(additions.stdout).toContain('\n20 changes (18 in the GraphQL schema), 0 breaking, 0 widening access\n');
    expect(additions.stderr).toBe(
      `svcgen: permissions and settings not compared: no ${path.join(root, 'svcgen.config.json')} (name the earlier config with --from-config)\n`,
    );

    const earlier = await project(root, 'earlier', {
      config: (c) => void (c.roles.catalog.tables.Product.delete = true),
    });
    const withConfig = await diff([
      '--project',
      SHOP,
      '--from',
      old,
      '--from-config',
      path.join(earlier, 'svcgen.config.json'),
      '--json',
    ]);
    expect(withConfig.code, show(withConfig)).toBe(1);
    expect(withConfig.stderr).toBe('');
    expect(json(withConfig.stdout)).toMatchObject({
      breaking: 1,
      widens: 0,
      config: { from: path.join(earlier, 'svcgen.config.json'), to: path.join(SHOP, 'svcgen.config.json') },
      changes: [
        { kind: 'field added', subject: 'Customer.vip' },
        { kind: 'field added', subject: 'Order.note' },
        {
          kind: 'grant removed',
          subject: 'catalog: Product.delete',
          detail: 'all rows',
          access: 'narrows',
          breaking: true,
        },
      ],
    });

    await fs.writeFile(old, current.replace('  note       String?\n', '  note       String?\n  memo       String?\n'));
    const removed = await diff(['--project', SHOP, '--from', old, '--json']);
    expect(removed.code).toBe(1);
    expect(JSON.parse(removed.stdout)).toEqual({
      changes: [{ kind: 'field removed', subject: 'Order.memo', detail: 'String?', breaking: true }],
      graphql: orderTextFieldRemoved('memo'),
      breaking: 17,
      widens: 0,
      config: null,
    });
    expect((await diff(['--project', SHOP, '--from', old, '--allow-breaking'])).code).toBe(0);
  });

  it('a config that cannot be read as the server reads it is a usage error (exit 2) naming the problem', {
    timeout: 120_000,
  }, async () => {
    const root = await tempDir('diff');
    const before = await project(root, 'before', {
      config: (c) => void c.roles.customer.tables.Order.read.fields.push('nickname'),
    });
    const bad = await diff(['--project', SHOP, '--from', path.join(before, 'schema.prisma')]);
    expect(bad.code, show(bad)).toBe(2);
    expect(bad.stdout).toBe('');
    expect(bad.stderr).toContain(
      `svcgen: cannot compare permissions: ${path.join(before, 'svcgen.config.json')} is invalid:`,
    );
    expect(bad.stderr).toContain('$.roles.customer.tables.Order.read.fields[6]: Order has no field "nickname"');

    await fs.writeFile(path.join(before, 'svcgen.config.json'), '{"project": {"id": "shop"},');
    const broken = await diff(['--project', SHOP, '--from', path.join(before, 'schema.prisma')]);
    expect(broken.code, show(broken)).toBe(2);
    expect(broken.stderr).toMatch(/^svcgen: .*svcgen\.config\.json: line 1, column \d+: not valid JSON/);

    const missing = await diff(['--project', SHOP, '--from', 'HEAD', '--to-config', path.join(root, 'nothing.json')]);
    expect(missing.code, show(missing)).toBe(2);
    expect(missing.stderr).toContain(
      `--to-config "${path.join(root, 'nothing.json')}" is neither a file nor <git ref>:<path> of a file`,
    );
  });

  it('compares with a git ref: the schema and the config at that ref, in a project below the repository root', {
    timeout: 120_000,
  }, async () => {
    const root = await tempDir('diff-git');
    const app = await project(root, 'app');
    const git = (...args: string[]) =>
      run('git', ['-c', 'user.name=svcgen test', '-c', 'user.email=test@example.com', ...args], { cwd: root });
    await git('init', '-q');
    await git('add', 'app/schema.prisma');
    await git('commit', '-q', '-m', 'schema only');
    await git('add', 'app/svcgen.config.json');
    await git('commit', '-q', '-m', 'config');
    const same = await diff(['--project', app, '--from', 'HEAD']);
    expect(same.code, show(same)).toBe(0);
    expect(same.stdout).toBe('no API changes\n');

    await project(root, 'app', {
      schema: replacing('  note       String?\n', '  note       String?\n  memo       String?\n'),
      config: (c) => void (c.roles.catalog.tables.City.update = true),
    });
    const want = [
      { kind: 'field added', subject: 'Order.memo', detail: 'String?', breaking: false },
      {
        kind: 'grant added',
        subject: 'catalog: City.update',
        detail: 'all rows, all fields',
        breaking: false,
        access: 'widens',
      },
    ];
    for (const from of ['HEAD', 'HEAD:app/schema.prisma']) {
      const changed = await diff(['--project', app, '--from', from, '--json']);
      expect(changed.code, show(changed)).toBe(0);
      expect(json(changed.stdout)).toEqual({
        changes: want,
        graphql: ORDER_MEMO_ADDED,
        breaking: 0,
        widens: 1,
        config: { from: 'HEAD:app/svcgen.config.json', to: path.join(app, 'svcgen.config.json') },
      });
    }
    const text = await diff(['--project', app, '--from', 'HEAD', '--fail-on-widen']);
    expect(text.code, show(text)).toBe(1);
    const lines = text.stdout.split('\n');
    expect(lines.slice(0, 3)).toEqual([
      '               field added  Order.memo  String?',
      'WIDENS ACCESS  grant added  catalog: City.update  all rows, all fields',
      'GraphQL:',
    ]);
    expect(lines.slice(-2)).toEqual(['12 changes (10 in the GraphQL schema), 0 breaking, 1 widening access', '']);

    // No config at that ref: the models alone, and stderr says so; --from-config takes <ref>:<path>.
    const older = await diff(['--project', app, '--from', 'HEAD~1', '--json']);
    expect(older.code, show(older)).toBe(0);
    expect(older.stderr).toBe(
      'svcgen: permissions and settings not compared: no HEAD~1:app/svcgen.config.json (name the earlier config with --from-config)\n',
    );
    expect(json(older.stdout)).toEqual({
      changes: [want[0]],
      graphql: ORDER_MEMO_ADDED,
      breaking: 0,
      widens: 0,
      config: null,
    });
    const named = await diff([
      '--project',
      app,
      '--from',
      'HEAD~1',
      '--from-config',
      'HEAD:app/svcgen.config.json',
      '--json',
    ]);
    expect(json(named.stdout)).toEqual({
      changes: want,
      graphql: ORDER_MEMO_ADDED,
      breaking: 0,
      widens: 1,
      config: { from: 'HEAD:app/svcgen.config.json', to: path.join(app, 'svcgen.config.json') },
    });

    const bad = await diff(['--project', app, '--from', 'no-such-ref-xyz']);
    expect(bad.code).toBe(2);
    expect(bad.stderr).toMatch(/^svcgen: --from "no-such-ref-xyz" is neither a file nor a git ref/);
  });

  it('issue 33: an implicit many-to-many replaced by a join model breaks REST and GraphQL clients (exit 1)', {
    timeout: 120_000,
  }, async () => {
    const root = await tempDir('diff');
    const before = await project(root, 'before', { schema: (s) => s + IMPLICIT_M2M });
    const after = await project(root, 'after', { schema: (s) => s + JOIN_MODEL });
    const text = await diff(['--project', after, '--from', path.join(before, 'schema.prisma')]);
    expect(text.code, show(text)).toBe(1);
    expect(text.stdout).toBe(`${M2M_REPORT.join('\n')}\n`);
  });

  it('storage: a bucket made public and its owner filter dropped widen access; --fail-on-widen exits 1 on them', {
    timeout: 120_000,
  }, async () => {
    const root = await tempDir('diff');
    const from = path.join(await project(root, 'before'), 'schema.prisma');
    const opened = await project(root, 'opened', { config: openAttachments });
    const text = await diff(['--project', opened, '--from', from]);
    expect(text.code, show(text)).toBe(0);
    expect(text.stdout).toBe(`${OPENED_REPORT.join('\n')}\n`);
    const gated = await diff(['--project', opened, '--from', from, '--fail-on-widen', '--json']);
    expect(gated.code, show(gated)).toBe(1);
    expect(json(gated.stdout)).toMatchObject({
      breaking: 0,
      widens: 2,
      changes: [
        { kind: 'bucket made public', subject: 'bucket attachments', access: 'widens', breaking: false },
        { kind: 'row filter removed', subject: 'customer: bucket attachments.read', access: 'widens', breaking: false },
      ],
    });
  });

  it('storage: a narrowed bucket rule narrows access: breaking as a narrowed table rule is, never a widening', {
    timeout: 120_000,
  }, async () => {
    const root = await tempDir('diff');
    const from = path.join(await project(root, 'before'), 'schema.prisma');
    const narrowed = await project(root, 'narrowed', {
      config: (c) => void (c.storage.buckets.attachments.roles.customer.read.filter.contentType = 'application/pdf'),
    });
    const text = await diff(['--project', narrowed, '--from', from, '--fail-on-widen']);
    expect(text.code, show(text)).toBe(1);
    expect(text.stdout).toBe(
      [
        'BREAKING  row filter changed  customer: bucket attachments.read  {"ownerId":"$user.id"} → {"contentType":"application/pdf","ownerId":"$user.id"}',
        '1 change, 1 breaking, 0 widening access',
        '',
      ].join('\n'),
    );
    // Nothing widens: --fail-on-widen finds nothing to fail on once the break is allowed.
    const allowed = await diff([
      '--project',
      narrowed,
      '--from',
      from,
      '--fail-on-widen',
      '--allow-breaking',
      '--json',
    ]);
    expect(allowed.code, show(allowed)).toBe(0);
    expect(json(allowed.stdout)).toMatchObject({
      breaking: 1,
      widens: 0,
      changes: [{ kind: 'row filter changed', access: 'narrows', breaking: true }],
    });
  });
});
