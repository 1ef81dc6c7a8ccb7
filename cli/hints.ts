/**
 * A svcgen command as a message should show it. svcgen is installed as a project's dev dependency
 * (README "Quick start in your own project"), so a bare `svcgen` is not on the PATH of the user's shell; `npx svcgen`
 * runs the project's own copy.
 */
export function command(args: string): string {
  return `npx svcgen ${args}`;
}

/** ` --project <dir>` for a command shown to the user, or '' for the current folder. */
export function projectFlag(project: string | undefined): string {
  return project === undefined || project === '.' || project === ''
    ? ''
    : ` --project ${/\s/.test(project) ? JSON.stringify(project) : project}`;
}
