import { describe, expect, it } from "vitest";
import { parseFleetConfig } from "../../src/core/config.ts";
import { parseConfigAssignment } from "../../src/core/config-overrides.ts";
import {
  allowedByPolicy,
  mergeRefusals,
  networkPolicyOf,
  parseAllowEntry,
  REGISTRY_HOSTS,
  reachableAddress,
} from "../../src/core/network-policy.ts";

describe("network policy", () => {
  it("allows the registries by default, over HTTPS only", () => {
    const p = networkPolicyOf(undefined);
    expect(p.mode).toBe("proxy");
    for (const host of Object.values(REGISTRY_HOSTS).flat()) expect(allowedByPolicy(p, host, 443)).toBe(true);
    expect(allowedByPolicy(p, "registry.npmjs.org", 80)).toBe(false);
    expect(allowedByPolicy(p, "evil.example", 443)).toBe(false);
    expect(allowedByPolicy(p, "REGISTRY.NPMJS.ORG.", 443)).toBe(true);
  });

  it("adds network.allow entries, with ports and wildcards; registries: false leaves the registries out", () => {
    const p = networkPolicyOf({
      allow: ["git.example.com", "mirror.example:8443", "*.corp.example"],
      registries: false,
    });
    expect(allowedByPolicy(p, "git.example.com", 443)).toBe(true);
    expect(allowedByPolicy(p, "git.example.com", 80)).toBe(true);
    expect(allowedByPolicy(p, "git.example.com", 22)).toBe(false);
    expect(allowedByPolicy(p, "mirror.example", 8443)).toBe(true);
    expect(allowedByPolicy(p, "mirror.example", 443)).toBe(false);
    expect(allowedByPolicy(p, "a.b.corp.example", 443)).toBe(true);
    expect(allowedByPolicy(p, "corp.example", 443)).toBe(false);
    expect(allowedByPolicy(p, "evilcorp.example", 443)).toBe(false);
    expect(allowedByPolicy(p, "registry.npmjs.org", 443)).toBe(false);
  });

  it("none allows nothing, host everything", () => {
    expect(allowedByPolicy(networkPolicyOf("none"), "registry.npmjs.org", 443)).toBe(false);
    expect(allowedByPolicy(networkPolicyOf("host"), "anything", 1)).toBe(true);
  });

  it("says what is wrong with an entry", () => {
    expect(parseAllowEntry("bad host!")).toMatch(/is not a host name/);
    expect(parseAllowEntry("example.com:99999")).toMatch(/port must be a number from 1 to 65535/);
    expect(parseAllowEntry("*")).toMatch(/is not a host name/);
    expect(parseAllowEntry("a.*.example")).toMatch(/is not a host name/);
    expect(parseAllowEntry("[::1]:8080")).toEqual({ host: "::1", ports: [8080] });
    expect(parseAllowEntry("10.0.0.5:3128")).toEqual({ host: "10.0.0.5", ports: [3128] });
  });

  it("never reaches loopback, link-local (cloud metadata), unspecified or multicast addresses", () => {
    for (const a of [
      "127.0.0.1",
      "127.8.9.1",
      "::1",
      "169.254.169.254",
      "0.0.0.0",
      "::",
      "fe80::1",
      "224.0.0.1",
      "::ffff:127.0.0.1",
      "fd00:ec2::254",
    ])
      expect(reachableAddress(a), a).toBe(false);
    for (const a of ["104.16.0.34", "10.0.0.5", "192.168.1.2", "2606:4700::6810:1622"])
      expect(reachableAddress(a), a).toBe(true);
  });

  it("adds up refusals of several runs by host, port and why", () => {
    expect(
      mergeRefusals(
        [{ host: "a.test", port: 443, count: 2, why: "not allowed" }],
        [
          { host: "a.test", port: 443, count: 3, why: "not allowed" },
          { host: "b.test", port: 80, count: 1, why: "no such host" },
        ],
      ),
    ).toEqual([
      { host: "a.test", port: 443, count: 5, why: "not allowed" },
      { host: "b.test", port: 80, count: 1, why: "no such host" },
    ]);
  });
});

describe("network, setup and limits in .github/fleet.yml", () => {
  it("reads them, and names the key of a bad value", () => {
    const ok = parseFleetConfig(
      "network: { allow: [git.example.com, 'mirror.example:8443'] }\nsetup: [npm ci]\nsetup_cache: [node_modules]\nsetup_network: host\nlimits: { memory_mb: 4096, pids: 512, cpus: 1.5 }\n",
    );
    if (!ok.ok) throw new Error(JSON.stringify(ok.problems));
    expect(ok.config.network).toEqual({
      allow: ["git.example.com", "mirror.example:8443"],
      registries: true,
    });
    expect(ok.config.limits).toEqual({ memory_mb: 4096, pids: 512, cpus: 1.5 });
    const bad = parseFleetConfig(
      "network: { allow: ['no such host'] }\nsetup_cache: ['../outside']\nlimits: { pids: 2 }\n",
    );
    if (bad.ok) throw new Error("accepted");
    const text = bad.problems.map((p) => `${p.path}: ${p.message}`).join("\n");
    expect(text).toMatch(/network/);
    expect(text).toMatch(/setup_cache/);
    expect(text).toMatch(/limits\.pids/);
  });

  it("config set refuses setup and network (file-only)", () => {
    for (const text of ["setup=npm ci", "network=host", "setup_cache=node_modules", "setup_network=host"]) {
      const r = parseConfigAssignment(text);
      expect(r.ok, text).toBe(false);
      if (!r.ok) expect(r.message).toMatch(/\.github\/fleet\.yml/);
    }
  });
});
