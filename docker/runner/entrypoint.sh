#!/bin/sh
# The Fleet runner image's entry point (docs/scale.md): checks what Fleet's action needs on this
# runner, then starts the Actions runner. A runner that lacks it would take a task's job and fail it;
# failing here keeps the job queued for a runner that works and names the fix.
#   (no args) / ARGS   the checks, then the runner ($RUNNER_RUN, default /home/runner/run.sh) with ARGS
#   check              the checks only (a plain self-hosted runner runs this before config.sh)
# FLEET_CODERS names the coders this runner serves ("claude codex", commas work too): each one's CLI
# must be on PATH. POSIX sh: the checks use only builtins and the tools they check.
set -eu

BWRAP="${BWRAP:-bwrap}"
RUNNER_RUN="${RUNNER_RUN:-/home/runner/run.sh}"

say() { printf 'fleet-runner: %s\n' "$*" >&2; }
failed=0
fail() {
  say "FAIL $1 -> fix: $2"
  failed=1
}

if command -v git >/dev/null 2>&1; then say "ok   git"; else
  fail "git: not found on PATH" "install git in the runner image (docker/runner/Dockerfile)"
fi

if ! command -v "$BWRAP" >/dev/null 2>&1; then
  fail "bubblewrap: $BWRAP not found on PATH" "install bubblewrap in the runner image (docker/runner/Dockerfile)"
# The namespaces and the fresh /proc Fleet's sandbox makes: what a container's seccomp, AppArmor or
# masked /proc refuse, and what the node's sysctls turn off (--disable-userns needs bubblewrap 0.8).
elif out=$("$BWRAP" --unshare-user --disable-userns --unshare-pid --unshare-ipc --unshare-uts --unshare-net \
  --ro-bind / / --proc /proc --dev /dev true 2>&1); then
  say "ok   bubblewrap starts a sandbox"
else
  fail "bubblewrap cannot start a sandbox: ${out:-no message}" \
    "give the runner container an unconfined seccomp and AppArmor profile and an unmasked /proc, and allow user namespaces on the node (docs/scale.md, 'What bubblewrap needs')"
fi

# Each configured coder's CLI (its command is the coder's name).
set -f
IFS=', '
for coder in ${FLEET_CODERS:-}; do
  case "$coder" in
    claude | codex | gemini | opencode) ;;
    *)
      say "FLEET_CODERS names '$coder', which is not a coder: use claude, codex, gemini or opencode; the runner did not start."
      exit 64
      ;;
  esac
  if command -v "$coder" >/dev/null 2>&1; then say "ok   $coder CLI"; else
    fail "$coder CLI: '$coder' not found on PATH" "build the runner image with its version (docker/runner/Dockerfile), or take $coder out of FLEET_CODERS"
  fi
done
unset IFS
set +f

if [ "$failed" -ne 0 ]; then
  say "the runner did not start: fix the FAIL lines above."
  exit 1
fi

if [ "${1:-}" = check ]; then exit 0; fi
exec "$RUNNER_RUN" "$@"
