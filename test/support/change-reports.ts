/**
 * Issue 33's edit, for the tests of `svcgen diff` and `svcgen dev`: issues and labels appended to
 * the example's schema, first as an implicit many-to-many (`labels Label[]` / `issues Issue[]`),
 * then with an explicit join model `IssueLabel` in its place.
 */
const model = (name: string, field: string, relation: string) => `
model ${name} {
  id        Int      @id @default(autoincrement())
  ${field}      String
  ${relation}
  createdAt DateTime @default(now())
  updatedAt DateTime @updatedAt
}
`;

export const IMPLICIT_M2M = `${model('Issue', 'title', 'labels    Label[]')}${model('Label', 'name ', 'issues    Issue[]')}`;

export const JOIN_MODEL = `${model('Issue', 'title', 'labels    IssueLabel[]')}${model('Label', 'name ', 'issues    IssueLabel[]')}
model IssueLabel {
  issueId   Int
  labelId   Int
  issue     Issue    @relation(fields: [issueId], references: [id])
  label     Label    @relation(fields: [labelId], references: [id])
  createdAt DateTime @default(now())
  updatedAt DateTime @updatedAt

  @@id([issueId, labelId])
}
`;

/**
 * The report in a stretch of output: from the first line after `change detected: …` to its count
 * line (`… widening access`, or `no API changes`), as `svcgen diff` prints it.
 */
export function reportIn(output: string): string[] {
  const lines = output.split('\n');
  const start = lines.findIndex((l) => l.startsWith('change detected: ')) + 1;
  const end = lines.findIndex((l, i) => i >= start && (/ widening access$/.test(l) || l === 'no API changes'));
  if (start === 0 || end < 0) throw new Error(`no change report in:\n${output}`);
  return lines.slice(start, end + 1);
}

/** What `svcgen diff` prints for IMPLICIT_M2M → JOIN_MODEL: breaking for REST and GraphQL clients alike. */
export const M2M_REPORT = [
  'BREAKING  relation changed  Issue.labels  Label[] → IssueLabel[]',
  '          table added       IssueLabel  /gw/api/rest/IssueLabel',
  'BREAKING  relation changed  Label.issues  Issue[] → IssueLabel[]',
  'GraphQL:',
  'BREAKING  ARG_CHANGED_KIND    Issue.labels arg orderBy has changed type from [LabelOrderBy!] to [IssueLabelOrderBy!].',
  'BREAKING  ARG_CHANGED_KIND    Issue.labels arg where has changed type from LabelWhere to IssueLabelWhere.',
  'BREAKING  ARG_CHANGED_KIND    Label.issues arg orderBy has changed type from [IssueOrderBy!] to [IssueLabelOrderBy!].',
  'BREAKING  ARG_CHANGED_KIND    Label.issues arg where has changed type from IssueWhere to IssueLabelWhere.',
  'BREAKING  FIELD_CHANGED_KIND  Issue.labels changed type from [Label!]! to [IssueLabel!]!.',
  'BREAKING  FIELD_CHANGED_KIND  IssueWhere.labels changed type from LabelWhere to IssueLabelWhere.',
  'BREAKING  FIELD_CHANGED_KIND  Label.issues changed type from [Issue!]! to [IssueLabel!]!.',
  'BREAKING  FIELD_CHANGED_KIND  LabelWhere.issues changed type from IssueWhere to IssueLabelWhere.',
  '11 changes (8 in the GraphQL schema), 10 breaking, 0 widening access',
];

/** Issue 33's storage edit of the example's config: the attachments bucket made public, the customer's owner filter on reads dropped. */
export function openAttachments(config: Record<string, any>): void {
  config.storage.buckets.attachments.public = true;
  config.storage.buckets.attachments.roles.customer.read = true;
}

/** What `svcgen diff` prints for openAttachments: two widenings, nothing breaking. */
export const OPENED_REPORT = [
  "WIDENS ACCESS  bucket made public  bucket attachments  anyone may read a file's metadata and bytes by id, without credentials",
  'WIDENS ACCESS  row filter removed  customer: bucket attachments.read  was rows where {"ownerId":"$user.id"}: now all rows',
  '2 changes, 0 breaking, 2 widening access',
];
