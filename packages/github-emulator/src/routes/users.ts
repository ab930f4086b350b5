import { HttpError, notFound } from "../http-error.ts";
import type { Router } from "../router.ts";
import type { World } from "../world.ts";

/** The signed-in user and other users (https://docs.github.com/en/rest/users/users). */
export function registerUserRoutes(r: Router, w: World): void {
  r.on("GET /user", (ctx) => {
    if (ctx.actor.kind !== "user") {
      throw new HttpError(
        ctx.actor.kind === "anonymous" ? 401 : 403,
        ctx.actor.kind === "anonymous" ? "Requires authentication" : "Resource not accessible by integration",
      );
    }
    return { status: 200, body: userDetail(w, ctx.actor.user.login) };
  });

  r.on("GET /users/{username}", (ctx) => {
    const u = w.state.users.get(String(ctx.params.username).toLowerCase());
    if (!u) throw notFound();
    return { status: 200, body: userDetail(w, u.login) };
  });
}

function userDetail(w: World, login: string) {
  const u = w.state.user(login);
  return {
    ...w.shapes.user(u),
    name: u.login,
    company: null,
    blog: "",
    location: null,
    email: null,
    hireable: null,
    bio: null,
    twitter_username: null,
    public_repos: 0,
    public_gists: 0,
    followers: 0,
    following: 0,
    created_at: "2024-01-01T00:00:00Z",
    updated_at: "2024-01-01T00:00:00Z",
  };
}
