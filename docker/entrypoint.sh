#!/bin/sh
# The Fleet image's entry point (docs/deploy.md).
#   serve          the GitHub App: checks its settings are there, then `fleet serve`, which checks them
#                  against GitHub (`fleet doctor`'s app checks) before it listens
#   run [ARGS]     a worker for FLEET_REPO: checks its settings, runs `fleet doctor --worker`, then
#                  `fleet run` with ARGS (its own options: --concurrency N, --poll MS, ...)
#   doctor [ARGS]  `fleet doctor` (e.g. `doctor --app` against a running app)
#   anything else  passed to `fleet` as it is (`tasks --repo owner/name`, `init --help`, ...)
# POSIX sh: the image's /bin/sh is dash.
set -eu

FLEET="${FLEET_BIN:-fleet}"

say() { printf 'fleet-entrypoint: %s\n' "$*" >&2; }

# Exits 64 (EX_USAGE) naming every variable in "$@" that is empty.
need() {
  missing=""
  for pair in "$@"; do
    name="${pair%%=*}"
    value="${pair#*=}"
    [ -n "$value" ] || missing="$missing $name"
  done
  if [ -n "$missing" ]; then
    say "$mode needs$missing (see docs/deploy.md); nothing started."
    exit 64
  fi
}

mode="${1:-serve}"
[ "$#" -gt 0 ] && shift

case "$mode" in
  serve)
    need "APP_ID=${APP_ID:-}" "PRIVATE_KEY_PATH or PRIVATE_KEY=${PRIVATE_KEY_PATH:-}${PRIVATE_KEY:-}" \
      "WEBHOOK_SECRET=${WEBHOOK_SECRET:-}"
    if [ -n "${PRIVATE_KEY_PATH:-}" ] && [ ! -r "$PRIVATE_KEY_PATH" ]; then
      say "PRIVATE_KEY_PATH=$PRIVATE_KEY_PATH is not a readable file: mount the app's .pem there (docs/deploy.md); nothing started."
      exit 64
    fi
    # Reachable from outside the container; production mode (no setup page without credentials).
    export HOST="${HOST:-0.0.0.0}" NODE_ENV="${NODE_ENV:-production}"
    [ -n "${FLEET_PUBLIC_URL:-}" ] || say "FLEET_PUBLIC_URL is not set: fleet serve refuses to start if a repository uses dispatch: actions."
    exec "$FLEET" serve "$@"
    ;;
  run)
    # The repository and its API come from the environment (FLEET_REPO, GITHUB_API_URL), so the doctor
    # and the worker look at the same target; ARGS are `fleet run`'s own options (--concurrency, ...).
    need "GITHUB_TOKEN or GH_TOKEN=${GITHUB_TOKEN:-}${GH_TOKEN:-}" "FLEET_REPO=${FLEET_REPO:-}"
    # What would fail at the first task fails now, with the fix.
    "$FLEET" doctor --worker --repo "$FLEET_REPO" || {
      say "fleet doctor --worker found a problem: fix the FAIL lines above; the worker did not start."
      exit 1
    }
    exec "$FLEET" run --repo "$FLEET_REPO" "$@"
    ;;
  doctor)
    exec "$FLEET" doctor "$@"
    ;;
  *)
    exec "$FLEET" "$mode" "$@"
    ;;
esac
