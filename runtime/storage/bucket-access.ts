/**
 * File metadata through the query layer (docs/storage.md "Permissions"): svcgen.files is one
 * catalog table (`_files`), and each bucket's role rules become an ordinary Policy whose rules also
 * pin the bucket and the environment. Lists, reads, filters, sorts, cursors, deletes and the
 * after-the-fact check of a create all run through the same compilers as table data, so a
 * customer's `ownerId: $user.id` is enforced exactly like a table's `customerId: $user.id`.
 */
import type { BucketConfig, Config } from '../config/index.ts';
import { FILE_FIELDS, FILES_SPEC, FILES_TABLE } from '../model/index.ts';
import { filesCatalog, Policy, roleOperand, type CatalogTable } from '../query/index.ts';

type BucketAction = 'read' | 'create' | 'delete';

/** The role of `svcgen files rm`; configured role names start with a letter, so none is this. */
export const OPERATOR_ROLE = '$operator';

/** A bucket's role rules as table rules of `_files`, each pinned to the bucket and environment and showing FILE_FIELDS only. */
function rolesFor(bucketName: string, bucket: BucketConfig, environment: string): Config['roles'] {
  const roles: Config['roles'] = {};
  for (const [role, rules] of Object.entries(bucket.roles)) {
    const table: Record<string, { filter: Record<string, unknown>; fields: string[] }> = {};
    for (const action of ['read', 'create', 'delete'] as const satisfies readonly BucketAction[]) {
      const rule = rules[action];
      if (rule === undefined || rule === false) continue;
      const own = rule === true ? {} : (rule.filter ?? {});
      table[action] = {
        filter: { ...own, bucket: bucketName, environment } as Record<string, unknown>,
        fields: [...FILE_FIELDS],
      };
    }
    roles[role] = { signup: false, tables: { [FILES_TABLE]: table as never } };
  }
  return roles;
}

/** Per bucket and environment, the Policy of its rules (built at start: both sets are small and fixed). */
export class BucketAccess {
  readonly catalog = filesCatalog();
  readonly table: CatalogTable = this.catalog.require(FILES_TABLE);
  private readonly policies = new Map<string, Policy>();

  constructor(config: Config) {
    for (const [name, bucket] of Object.entries(config.storage.buckets)) {
      for (const environment of config.environments) {
        this.policies.set(
          `${name}\n${environment}`,
          new Policy(
            rolesFor(name, bucket, environment),
            (table, path, op, value) => roleOperand(this.catalog, table, path, op, value),
            () => FILES_SPEC.fields.map((f) => f.name),
          ),
        );
      }
    }
  }

  /**
   * The Policy of `svcgen files rm` (an operator at the database, not a caller of the API): the
   * role OPERATOR_ROLE, which no configured role can be named, may read and delete every file of
   * the bucket in the environment.
   */
  operatorPolicy(bucket: string, environment: string): Policy {
    const rules = { roles: { [OPERATOR_ROLE]: { read: true, delete: true } } } as unknown as BucketConfig;
    return new Policy(
      rolesFor(bucket, rules, environment),
      (table, path, op, value) => roleOperand(this.catalog, table, path, op, value),
      () => FILES_SPEC.fields.map((f) => f.name),
    );
  }

  policy(bucket: string, environment: string): Policy {
    const policy = this.policies.get(`${bucket}\n${environment}`);
    if (!policy) throw new Error(`no bucket ${bucket} in ${environment}`);
    return policy;
  }
}
