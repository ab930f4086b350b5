# Fleet in one image, for the app (`serve`) and for workers (`run`): docs/deploy.md.
#
#   docker build -t fleet .                                         # the app: no coder CLI
#   docker build -t fleet-worker \
#     --build-arg CLAUDE_CODE_VERSION=2.1.197 \
#     --build-arg CODEX_VERSION=0.171.0 .                           # a worker with Claude Code and Codex
#
# A coder CLI is installed only when its version is given (each in a layer of its own, so changing one
# rebuilds only that layer); the versions above are those Fleet's tests run (package.json).
# Workers run agents in bubblewrap: the container needs the options in docs/deploy.md, and
# `docker run ... fleet-worker doctor --worker` says whether they are right.

FROM node:24-bookworm-slim

# git: worktrees, fetch and push (and the state branch); bubblewrap: the agent sandbox (0.8, with
# --disable-userns); tini: signals reach fleet (SIGTERM stops the app and workers cleanly).
RUN apt-get update \
  && apt-get install -y --no-install-recommends git bubblewrap ca-certificates tini \
  && rm -rf /var/lib/apt/lists/*

WORKDIR /opt/fleet
ENV NODE_ENV=production

# Dependencies first: a change to the sources does not reinstall them. The workspace packages'
# manifests are part of the lockfile; the packages themselves (the emulator, the model servers) are
# development dependencies and are left out.
COPY package.json package-lock.json ./
COPY packages/github-emulator/package.json packages/github-emulator/package.json
COPY packages/model-servers/package.json packages/model-servers/package.json
RUN npm ci --omit=dev --no-audit --no-fund && npm cache clean --force

COPY bin/ bin/
COPY scripts/ scripts/
COPY src/ src/
# The app's manifest (Probot's setup page) and the task workflow template `fleet init` writes.
COPY app.yml action.yml ./
COPY .github/workflows/fleet-task.yml .github/workflows/fleet-task.yml
COPY docker/entrypoint.sh /usr/local/bin/fleet-entrypoint

# `fleet serve` bundles src/ into build/ at each start: the folder is the app user's to write.
RUN ln -s /opt/fleet/bin/fleet.js /usr/local/bin/fleet \
  && mkdir build && chown node:node build \
  && chmod 0755 /usr/local/bin/fleet-entrypoint

# The coder CLIs, each optional. npm's global folder is on PATH (/usr/local/bin).
ARG CLAUDE_CODE_VERSION=""
RUN if [ -n "$CLAUDE_CODE_VERSION" ]; then \
      npm install -g --no-audit --no-fund "@anthropic-ai/claude-code@$CLAUDE_CODE_VERSION" && npm cache clean --force; \
    fi
ARG CODEX_VERSION=""
RUN if [ -n "$CODEX_VERSION" ]; then \
      npm install -g --no-audit --no-fund "@openai/codex@$CODEX_VERSION" && npm cache clean --force; \
    fi
ARG GEMINI_CLI_VERSION=""
RUN if [ -n "$GEMINI_CLI_VERSION" ]; then \
      npm install -g --no-audit --no-fund "@google/gemini-cli@$GEMINI_CLI_VERSION" && npm cache clean --force; \
    fi
ARG OPENCODE_VERSION=""
RUN if [ -n "$OPENCODE_VERSION" ]; then \
      npm install -g --no-audit --no-fund "opencode-ai@$OPENCODE_VERSION" && npm cache clean --force; \
    fi

# Not root: the sandbox makes its own user namespace, and nothing here needs more.
USER node
ENV FLEET_HOME=/home/node/.fleet
EXPOSE 3000
ENTRYPOINT ["/usr/bin/tini", "--", "/usr/local/bin/fleet-entrypoint"]
CMD ["serve"]
