import type { ApplicationFunction } from "probot";
import { knownCoders } from "../agents/index.ts";
import { onIssueLabeled } from "./on-issue-labeled.ts";

export interface FleetAppOptions {
  knownCoders?: readonly string[];
}

/** The Probot application: wires webhook events to Fleet's handlers. */
export function createFleetApp(options: FleetAppOptions = {}): ApplicationFunction {
  const deps = { knownCoders: options.knownCoders ?? knownCoders };
  return (app) => {
    app.on("issues.labeled", async (context) => {
      // Fleet's own label changes (and other bots') never start work.
      if (context.isBot) return;
      await onIssueLabeled(context, deps);
    });
  };
}

export default createFleetApp();
