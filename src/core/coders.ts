/**
 * The coders Fleet can run, as facts: what each is called, which executable and model it uses, which
 * variables carry its credential and which model API it talks to. The adapters in src/agents add how to
 * call the CLI and read its output; `.github/fleet.yml`'s built-in coders are made from these entries.
 * Adding a coder: an entry here and an adapter there (the registry test checks both agree).
 */

/** A model API request a coder's CLI makes: the model gateway forwards these and nothing else. */
export interface ModelRoute {
  method: string;
  path: RegExp;
}

export interface CoderFacts {
  /** The label name (`fleet:<name>`) and the key under `coders:` in the config. */
  name: string;
  displayName: string;
  /** Executable name looked up on PATH. */
  binary: string;
  /** The npm package the CLI installs from, when it is on npm. */
  npmPackage?: string;
  /** The model a repository gets when its config names none (`coders.<name>.model`). */
  defaultModel: string;
  /** How the prompt reaches the CLI: on stdin (no argv length limit) or as an argument. */
  promptOn: "stdin" | "argv";
  credential: {
    /** The variable the CLI reads its API key from; a configured credential of any other name travels in it. */
    env: string;
    /** Other variables the CLI reads a credential from: a configured credential of one of these names travels in it. */
    aliases: readonly string[];
    /** What `coders.<name>.credentials` names when the config names none, in order of preference. */
    defaults: readonly string[];
  };
  /**
   * Set when the CLI takes a model API base URL (`variable`: the environment variable it reads it
   * from, when it reads one): its runs go through Fleet's model gateway to `upstream`, which forwards
   * only `routes`, and the agent holds a per-run token instead of the credential. Absent: the CLI cannot
   * be pointed elsewhere and is handed its credential itself.
   */
  gateway?: {
    upstream: string;
    routes: readonly ModelRoute[];
    variable?: string;
  };
  /**
   * The files of one session in the CLI's HOME (paths relative to it), all a resumed run needs: the
   * only thing carried from one run of a task into the next (each run starts from an empty HOME).
   */
  sessionFiles?: (sessionId: string) => RegExp;
  /** Whether the CLI has been run against its real binary here (false: parsing follows its documentation). */
  verified: boolean;
}

/** A session id as it may appear in a file name (anything else carries nothing). */
const idPart = (id: string) => (/^[A-Za-z0-9_-]{1,128}$/.test(id) ? id : "\\0never");

const claude: CoderFacts = {
  name: "claude",
  displayName: "Claude Code",
  binary: "claude",
  npmPackage: "@anthropic-ai/claude-code",
  // The CLI's alias for the current Sonnet: a task never asks for a model the API has retired.
  defaultModel: "sonnet",
  promptOn: "stdin",
  credential: {
    env: "ANTHROPIC_API_KEY",
    aliases: ["ANTHROPIC_AUTH_TOKEN", "CLAUDE_CODE_OAUTH_TOKEN"],
    // ANTHROPIC_AUTH_TOKEN is a proxy's bearer token: used only when a repository names it.
    defaults: ["ANTHROPIC_API_KEY", "CLAUDE_CODE_OAUTH_TOKEN"],
  },
  gateway: {
    upstream: "https://api.anthropic.com",
    routes: [
      { method: "POST", path: /^\/v1\/messages(\/count_tokens)?$/ },
      { method: "GET", path: /^\/v1\/models(\/[\w.-]+)?$/ },
    ],
    variable: "ANTHROPIC_BASE_URL",
  },
  // Claude Code 2.1: ~/.claude/projects/<the cwd, as a name>/<session>.jsonl
  sessionFiles: (id) => new RegExp(`^\\.claude/projects/[^/]+/${idPart(id)}\\.jsonl$`),
  verified: true,
};

const codex: CoderFacts = {
  name: "codex",
  displayName: "Codex",
  binary: "codex",
  npmPackage: "@openai/codex",
  defaultModel: "gpt-5-codex",
  promptOn: "stdin",
  credential: { env: "OPENAI_API_KEY", aliases: ["CODEX_API_KEY"], defaults: ["OPENAI_API_KEY"] },
  // Codex ignores OPENAI_BASE_URL: the base URL is a model provider of its own (`-c model_providers.*`).
  gateway: {
    upstream: "https://api.openai.com",
    routes: [
      { method: "POST", path: /^\/v1\/responses$/ },
      { method: "GET", path: /^\/v1\/models$/ },
    ],
  },
  // Codex 0.171 (CODEX_HOME is the run's HOME): sessions/<yyyy>/<mm>/<dd>/rollout-<time>-<session>.jsonl
  sessionFiles: (id) => new RegExp(`^sessions/\\d{4}/\\d{2}/\\d{2}/rollout-[\\dT:-]+-${idPart(id)}\\.jsonl$`),
  verified: true,
};

const agy: CoderFacts = {
  name: "agy",
  displayName: "Antigravity",
  binary: "agy",
  defaultModel: "gemini-2.5-pro",
  promptOn: "argv",
  credential: { env: "GEMINI_API_KEY", aliases: [], defaults: ["GEMINI_API_KEY"] },
  verified: false,
};

const gemini: CoderFacts = {
  name: "gemini",
  displayName: "Gemini CLI",
  binary: "gemini",
  npmPackage: "@google/gemini-cli",
  // The Gemini CLI's own default model.
  defaultModel: "gemini-2.5-pro",
  promptOn: "argv",
  credential: { env: "GEMINI_API_KEY", aliases: ["GOOGLE_API_KEY"], defaults: ["GEMINI_API_KEY"] },
  gateway: {
    upstream: "https://generativelanguage.googleapis.com",
    routes: [
      {
        method: "POST",
        path: /^\/v1(beta)?\/models\/[\w.-]+:(generateContent|streamGenerateContent|countTokens)$/,
      },
    ],
    variable: "GOOGLE_GEMINI_BASE_URL",
  },
  // Gemini CLI 0.61: ~/.gemini/tmp/<project>/chats/session-<time>-<the session id's first 8>.jsonl
  sessionFiles: (id) =>
    new RegExp(`^\\.gemini/tmp/[^/]+/chats/session-[\\dT:-]+-${idPart(id).slice(0, 8)}\\.jsonl$`),
  verified: true,
};

const opencode: CoderFacts = {
  name: "opencode",
  displayName: "opencode",
  binary: "opencode",
  npmPackage: "opencode-ai",
  // An Anthropic model id: Fleet's runs name the Anthropic Messages API as opencode's provider.
  defaultModel: "claude-sonnet-4-5",
  promptOn: "stdin",
  credential: { env: "ANTHROPIC_API_KEY", aliases: [], defaults: ["ANTHROPIC_API_KEY"] },
  // opencode takes its base URL from its config file (a provider's `baseURL`), not a variable.
  gateway: {
    upstream: "https://api.anthropic.com",
    routes: [{ method: "POST", path: /^\/v1\/messages(\/count_tokens)?$/ }],
  },
  // opencode 1.18 keeps every session in one SQLite database (with its write-ahead log).
  sessionFiles: () => /^\.local\/share\/opencode\/opencode\.db(-wal|-shm)?$/,
  verified: true,
};

/** Every coder, by name, in the order labels and messages list them. */
export const CODERS = Object.freeze({ claude, codex, agy, gemini, opencode });

export type CoderName = keyof typeof CODERS;

/** The coders' names (`fleet:<name>` labels), in registry order. */
export const CODER_NAMES: readonly CoderName[] = Object.freeze(Object.keys(CODERS) as CoderName[]);

export const isKnownCoder = (name: string): name is CoderName => Object.hasOwn(CODERS, name);

/** A coder's facts, or undefined for a name Fleet has no adapter for. */
export const coderFacts = (name: string): CoderFacts | undefined =>
  isKnownCoder(name) ? CODERS[name] : undefined;

/** Every variable some coder reads its credential from: what a worker may hand an agent without being told. */
export const CODER_CREDENTIAL_VARIABLES: readonly string[] = Object.freeze([
  ...new Set(Object.values(CODERS).flatMap((c) => [c.credential.env, ...c.credential.aliases])),
]);
