/** The GitHub App the emulator plays in Fleet's tests: Fleet's own, whose bot is `fleet[bot]`. */
export const FLEET_APP = { appSlug: "fleet", appName: "Fleet" } as const;
