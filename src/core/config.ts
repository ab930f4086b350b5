// `.github/fleet.yml`: the field table (config-fields.ts: each key once, with its schema, default,
// error words and what `config set` may do with it), reading the file (config-file.ts) and the
// overrides `config set` stores (config-overrides.ts). Import from here.

export {
  type BudgetLimits,
  type CoderConfig,
  type ConfigValue,
  DISPATCH_MODES,
  type DispatchMode,
  FLEET_CONFIG_PATH,
  type FleetConfig,
  REPO_ROLES,
  type RepoRole,
  SANDBOX_MODES,
  type SandboxMode,
} from "./config-fields.ts";
export {
  type ConfigProblem,
  DEFAULT_CODERS,
  defaultFleetConfig,
  isDefaultModel,
  modelFor,
  NO_MODEL,
  type ParseConfigResult,
  parseFleetConfig,
  suggest,
} from "./config-file.ts";
export {
  applyOverrides,
  assignmentsText,
  CONFIG_KEYS,
  type ConfigAssignment,
  checkOverride,
  type DroppedOverride,
  FILE_ONLY_KEYS,
  type OverrideUpdate,
  parseConfigAssignment,
  parseConfigAssignments,
  type ResolvedOverrides,
  resolveOverrides,
  updateOverrides,
} from "./config-overrides.ts";
