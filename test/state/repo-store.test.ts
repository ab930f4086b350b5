import { describe, expect, it } from "vitest";
import { gitRemoteUrl, stateTransportFrom } from "../../src/state/repo-store.ts";

describe("gitRemoteUrl", () => {
  it("maps github.com's API to github.com, GitHub Enterprise's /api/v3 to its host, and any other API root to its origin", () => {
    expect(gitRemoteUrl("https://api.github.com", "octo", "widgets")).toBe(
      "https://github.com/octo/widgets.git",
    );
    expect(gitRemoteUrl("https://ghe.example.com/api/v3/", "octo", "widgets")).toBe(
      "https://ghe.example.com/octo/widgets.git",
    );
    expect(gitRemoteUrl("http://127.0.0.1:4321", "octo-org", "w.js")).toBe(
      "http://127.0.0.1:4321/octo-org/w.js.git",
    );
  });
});

describe("stateTransportFrom", () => {
  it("defaults to git, takes api, and names the valid values for anything else", () => {
    expect(stateTransportFrom({})).toBe("git");
    expect(stateTransportFrom({ FLEET_STATE_TRANSPORT: " api " })).toBe("api");
    expect(() => stateTransportFrom({ FLEET_STATE_TRANSPORT: "rest" })).toThrow(/"rest".*git, api/);
  });
});
