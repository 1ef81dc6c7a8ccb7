/**
 * Everything that changed between two versions of a project, classified (docs/diff.md): the one
 * report `svcgen diff` and `svcgen dev` both print (with reportLines), so that the two never
 * disagree on what a change breaks or whom it lets in.
 */
import type { Config } from '../../runtime/config/index.ts';
import type { TableSpec } from '../../runtime/model/index.ts';
import { diffConfigs } from './diff-config.ts';
import { diffEndpoints } from './diff-endpoints.ts';
import { diffCodeFields, diffGraphql, type GraphqlChange } from './diff-graphql.ts';
import { diffModels } from './diff-models.ts';
import { type Change, summarize } from './report.ts';

/** One version: its model, and its config as the server reads it (undefined: not known, not compared). */
export interface ProjectVersion {
  readonly tables: readonly TableSpec[];
  readonly config?: Config;
  /** Its generated/openapi.json, for the endpoints of its own code (undefined: not compared). */
  readonly openapi?: unknown;
  /** Its generated/schema.graphql, for the GraphQL fields of its own code (undefined: not compared). */
  readonly schemaGraphql?: string;
}

export interface ChangeReport {
  /** Model changes (REST), then roles, buckets and settings. */
  readonly changes: readonly Change[];
  /** The published GraphQL schema's changes. */
  readonly graphql: readonly GraphqlChange[];
  /** Breaking entries of both lists: what fails `svcgen diff` (exit 1). */
  readonly breaking: number;
  /** Changes that widen access: what fails `svcgen diff --fail-on-widen`. */
  readonly widens: number;
  /** Whether both configs were known and compared. */
  readonly configCompared: boolean;
}

export function changeReport(before: ProjectVersion, after: ProjectVersion): ChangeReport {
  const configCompared = before.config !== undefined && after.config !== undefined;
  const changes: Change[] = [
    ...diffModels(before.tables, after.tables),
    ...(before.openapi !== undefined && after.openapi !== undefined
      ? diffEndpoints(before.openapi, after.openapi)
      : []),
    ...(configCompared ? diffConfigs(before.config!, after.config!, after.tables) : []),
  ];
  const graphql = [
    ...diffGraphql(before.tables, after.tables),
    ...(before.schemaGraphql !== undefined && after.schemaGraphql !== undefined
      ? diffCodeFields(before.schemaGraphql, after.schemaGraphql, [...before.tables, ...after.tables])
      : []),
  ];
  return { changes, graphql, ...summarize(changes, graphql), configCompared };
}
