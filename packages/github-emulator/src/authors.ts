import type { User } from "./state.ts";

export interface Identity {
  name: string;
  email: string;
  date?: Date;
}

/** The commit identity GitHub gives a user who names none: their no-reply address. */
export const noreplyIdentity = (u: User): Identity => ({
  name: u.login,
  email: `${u.id}+${u.login}@users.noreply.github.com`,
});

/** An `author` or `committer` of a request body, when it names both a name and an email. */
export function identityFrom(v: unknown): Identity | undefined {
  const o = v as { name?: string; email?: string; date?: string } | undefined;
  if (!o?.name || !o.email) return undefined;
  return { name: o.name, email: o.email, date: o.date ? new Date(o.date) : undefined };
}
