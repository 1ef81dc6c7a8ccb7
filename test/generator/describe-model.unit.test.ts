// Stage 2 of the generator (generator/model/describe-model.ts): a Prisma schema's models as the
// runtime's table descriptions, read with Prisma's own parser (its WebAssembly build, offline, no
// database), and the schemas svcgen refuses to serve with what to change (README "A project").
import { describe, expect, it } from 'vitest';
import { describeModel, ModelError, unknownFileBuckets } from '../../generator/model/describe-model.ts';
import { readDmmf, type DMMF } from '../../generator/prisma/index.ts';
import type { FieldSpec } from '../../runtime/model/index.ts';

const DATASOURCE = 'datasource db {\n  provider = "postgresql"\n}\n';
const TIMES = '  createdAt DateTime @default(now())\n  updatedAt DateTime @updatedAt\n';

const SCHEMA = `${DATASOURCE}
enum Status {
  open
  paid
  @@map("order_status")
}

model Book {
  id        Int      @id @default(autoincrement())
  title     String
  status    Status   @default(open)
  tags      String[]
  price     Decimal  @db.Decimal(10, 2)
  authorId  String?
  author    Author?  @relation(fields: [authorId], references: [id])
  code      String   @default(cuid())
  lines     Line[]
${TIMES}}

model Author {
  id        String   @id @default(uuid(7))
  email     String   @unique @db.VarChar(200)
  name      String?  @map("full_name")
  mentorId  String?
  mentor    Author?  @relation("Mentoring", fields: [mentorId], references: [id])
  mentees   Author[] @relation("Mentoring")
  books     Book[]
${TIMES}  @@map("authors")
}

model Line {
  bookId    Int
  position  Int
  text      String
  book      Book     @relation(fields: [bookId], references: [id])
${TIMES}  @@id([bookId, position])
}
`;

/** A FieldSpec with the defaults of a plain required column. */
const field = (name: string, type: FieldSpec['type'], extra: Partial<FieldSpec> = {}): FieldSpec => ({
  name,
  column: name,
  type,
  list: false,
  nullable: false,
  id: false,
  unique: false,
  dbDefault: false,
  managed: false,
  ...extra,
});
const CREATED = field('createdAt', 'DateTime', { dbDefault: true, managed: true });
const UPDATED = field('updatedAt', 'DateTime', { managed: true });

async function problemsOf(schemaOrDmmf: string | DMMF.Document): Promise<string[]> {
  const dmmf = typeof schemaOrDmmf === 'string' ? await readDmmf(schemaOrDmmf) : schemaOrDmmf;
  try {
    describeModel(dmmf);
  } catch (error) {
    if (error instanceof ModelError) return error.problems;
    throw error;
  }
  throw new Error('the schema was accepted');
}

describe('describeModel', () => {
  it('describes tables sorted by name, with columns, keys, defaults, native types, enums and relations', async () => {
    const tables = describeModel(await readDmmf(SCHEMA));
    expect(tables.map((t) => [t.name, t.dbName, t.primaryKey])).toEqual([
      ['Author', 'authors', ['id']],
      ['Book', 'Book', ['id']],
      ['Line', 'Line', ['bookId', 'position']],
    ]);
    const [author, book, line] = tables;
    expect(author!.fields).toEqual([
      field('id', 'String', { id: true, clientDefault: 'uuid7' }),
      field('email', 'String', { unique: true, nativeType: ['VarChar', ['200']] }),
      field('name', 'String', { column: 'full_name', nullable: true }),
      field('mentorId', 'String', { nullable: true }),
      CREATED,
      UPDATED,
    ]);
    expect(book!.fields).toEqual([
      field('id', 'Int', { id: true, dbDefault: true }),
      field('title', 'String'),
      field('status', 'Enum', { enumValues: ['open', 'paid'], enumDbName: 'order_status', dbDefault: true }),
      field('tags', 'String', { list: true }),
      field('price', 'Decimal', { nativeType: ['Decimal', ['10', '2']] }),
      field('authorId', 'String', { nullable: true }),
      field('code', 'String', { clientDefault: 'cuid' }),
      CREATED,
      UPDATED,
    ]);
    expect(line!.fields.map((f) => f.name)).toEqual(['bookId', 'position', 'text', 'createdAt', 'updatedAt']);
    // Both sides of each relation, the foreign key named from the side that holds it.
    expect(author!.relations).toEqual([
      { name: 'mentor', target: 'Author', kind: 'one', fields: ['mentorId'], targetFields: ['id'], nullable: true },
      { name: 'mentees', target: 'Author', kind: 'many', fields: ['id'], targetFields: ['mentorId'], nullable: false },
      { name: 'books', target: 'Book', kind: 'many', fields: ['id'], targetFields: ['authorId'], nullable: false },
    ]);
    expect(book!.relations).toEqual([
      { name: 'author', target: 'Author', kind: 'one', fields: ['authorId'], targetFields: ['id'], nullable: true },
      { name: 'lines', target: 'Line', kind: 'many', fields: ['id'], targetFields: ['bookId'], nullable: false },
    ]);
    expect(line!.relations).toEqual([
      { name: 'book', target: 'Book', kind: 'one', fields: ['bookId'], targetFields: ['id'], nullable: false },
    ]);
  });

  it.each<[string, string, Partial<FieldSpec>]>([
    ['uuid()', 'String @id @default(uuid())', { clientDefault: 'uuid4' }],
    ['uuid(4)', 'String @id @default(uuid(4))', { clientDefault: 'uuid4' }],
    ['uuid(7)', 'String @id @default(uuid(7))', { clientDefault: 'uuid7' }],
    ['cuid()', 'String @id @default(cuid())', { clientDefault: 'cuid' }],
    ['nanoid()', 'String @id @default(nanoid())', { clientDefault: 'nanoid' }],
    ['ulid()', 'String @id @default(ulid())', { clientDefault: 'ulid' }],
    ['autoincrement()', 'Int @id @default(autoincrement())', { dbDefault: true }],
    ['dbgenerated()', 'String @id @default(dbgenerated("gen_random_uuid()"))', { dbDefault: true }],
    ['a literal', 'String @id @default("x")', { dbDefault: true }],
    ['none', 'String @id', {}],
  ])('key default %s: made by the client or by the database', async (_name, declaration, want) => {
    const [table] = describeModel(await readDmmf(`${DATASOURCE}model T {\n  id ${declaration}\n${TIMES}}\n`));
    const id = table!.fields[0]!;
    expect({ dbDefault: id.dbDefault, clientDefault: id.clientDefault }).toEqual({
      dbDefault: false,
      clientDefault: undefined,
      ...want,
    });
  });

  it('refuses models without createdAt/updatedAt or a primary key, each problem with the fix', async () => {
    const schema = `${DATASOURCE}
model NoTimes {
  id Int @id
}
model Half {
  id        Int      @id
  createdAt DateTime
  updatedAt DateTime @updatedAt
}
model WrongTypes {
  id        Int    @id
  createdAt String @default("now")
  updatedAt DateTime
}
model NoKey {
  name String @unique
${TIMES}}
`;
    expect(await problemsOf(schema)).toEqual([
      'model Half is missing createdAt DateTime @default(now()); add it to the model',
      'model NoKey has no primary key; add @id to a field or @@id([...]) to the model',
      'model NoTimes is missing createdAt DateTime @default(now()) and updatedAt DateTime @updatedAt; add them to the model',
      'model WrongTypes is missing createdAt DateTime @default(now()) and updatedAt DateTime @updatedAt; add them to the model',
    ]);
  });

  // Prisma's parser accepts neither of these, so they are made by editing a parsed model: the checks
  // still guard what the generator is handed.
  it('refuses a model named like a REST route and a scalar type it cannot serve', async () => {
    const parsed = await readDmmf(
      `${DATASOURCE}model Bulk {\n  id Int @id\n${TIMES}}\nmodel Book {\n  id Int @id\n  title String\n${TIMES}}\n`,
    );
    const dmmf = structuredClone(parsed) as DMMF.Document;
    const models = dmmf.datamodel.models as DMMF.Model[];
    (models.find((m) => m.name === 'Bulk') as { name: string }).name = '_bulk';
    const title = models.find((m) => m.name === 'Book')!.fields.find((f) => f.name === 'title') as { type: string };
    title.type = 'Geometry';
    expect(describeModel(parsed).map((t) => t.name)).toEqual(['Book', 'Bulk']);
    expect(await problemsOf(dmmf)).toEqual([
      'model _bulk: the name is reserved by the REST API',
      'model Book: field title has a type svcgen cannot serve (Geometry)',
    ]);
  });

  it('puts every problem in the error message, one a line', async () => {
    const dmmf = await readDmmf(`${DATASOURCE}model A {\n  id Int @id\n}\n`);
    expect(() => describeModel(dmmf)).toThrow(
      'schema.prisma cannot be served:\n  - model A is missing createdAt DateTime @default(now()) and updatedAt DateTime @updatedAt; add them to the model',
    );
  });

  it('reads /// @svcgen.file(<bucket>) into the field, and refuses markers and fields that cannot hold a file id', async () => {
    const schema = `${DATASOURCE}model Doc {
  id       Int     @id
  /// @svcgen.file(attachments)
  invoice  String? @db.Uuid
  scan     String  /// @svcgen.file(scans, onDelete: delete)
${TIMES}}
`;
    const [doc] = describeModel(await readDmmf(schema));
    expect(doc!.fields.find((f) => f.name === 'invoice')!.file).toEqual({ bucket: 'attachments', onDelete: 'keep' });
    expect(doc!.fields.find((f) => f.name === 'scan')!.file).toEqual({ bucket: 'scans', onDelete: 'delete' });
    expect(doc!.fields.find((f) => f.name === 'id')!.file).toBeUndefined();
    expect(unknownFileBuckets([doc!], ['attachments'], schema)).toEqual([
      'schema.prisma:8: model Doc: field scan references files of bucket scans, which storage.buckets does not declare (the buckets are attachments)',
    ]);
    expect(unknownFileBuckets([doc!], [], schema)).toHaveLength(2);

    const bad = `${DATASOURCE}model Doc {
  id     Int      @id
  /// @svcgen.file(attachments)
  count  Int
  /// @svcgen.file(attachments)
  ids    String[]
  /// @svcgen.file(attachments)
  at     DateTime?
  /// @svcgen.file()
  none   String?
  /// @svcgen.file(attachments, onDelete: cascade)
  extra  String?
${TIMES}}
`;
    expect(await problemsOf(bad)).toEqual([
      'model Doc: field count: a file reference holds one file id, so the field must be String or String @db.Uuid (not Int)',
      'model Doc: field ids: a file reference holds one file id, so the field must be String or String @db.Uuid (not String[])',
      'model Doc: field at: a file reference holds one file id, so the field must be String or String @db.Uuid (not DateTime)',
      'model Doc: field none: @svcgen.file needs the name of a bucket; write /// @svcgen.file(<bucket>) or /// @svcgen.file(<bucket>, onDelete: delete) (found "@svcgen.file()")',
      'model Doc: field extra: @svcgen.file takes only onDelete: keep or onDelete: delete after the bucket; write /// @svcgen.file(<bucket>) or /// @svcgen.file(<bucket>, onDelete: delete) (found "@svcgen.file(attachments, onDelete: cascade)")',
    ]);
  });
});
