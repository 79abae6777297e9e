// The helpers plugin of conformance/helpers/SPEC.md in JavaScript: every
// native helper (`sluice:plugin/helpers`) through the SDK's functions, and
// the attacks the host must bound.
import {
  Patterns,
  Plugin,
  TimeFormat,
  emit,
  exportPlugin,
  formatRfc3339,
  jsonGet,
  jsonObjectCheck,
  logfmt,
  reject,
} from "./sluice-plugin.js";

function error(call) {
  try {
    call();
  } catch (e) {
    return e;
  }
  return null;
}

export class HelpersDemo extends Plugin {
  static configKeys = ["zone"];

  setup(config) {
    const rule = { format: "%Y-%m-%d %H:%M:%S" };
    if (config.zone !== undefined) rule.zone = config.zone;
    this.time = new TimeFormat(rule);
    this.patterns = new Patterns(["^%{INT:pid} %{LOGLEVEL:level} %{GREEDYDATA:msg}$", "^%{GREEDYDATA:other}$"]);
  }

  process(record) {
    const pairs = logfmt(record.payload);
    const attack = pairs.attack;
    if (attack === "pattern") {
      const matched = new Patterns(["^(a+)+$"]).match("a".repeat(100000) + "!");
      return emit({ matched: matched !== null });
    }
    if (attack === "path") return reject(String(error(() => jsonGet("{}", "a.".repeat(10000) + "a")).message));
    if (attack === "payload") {
      const size = Number(pairs.mib ?? "64") * (1 << 20);
      const body = new Uint8Array(size + 8);
      body.set(new TextEncoder().encode('{"a":"'));
      body.fill(120, 6, 6 + size);
      body.set(new TextEncoder().encode('"}'), 6 + size);
      const got = jsonGet(body, "b");
      return emit({ bytes: body.length, found: got[0] !== undefined });
    }
    if (attack === "flood") {
      const kept = [];
      for (let i = 0; i < 1000; i++) {
        const e = error(() => kept.push(new TimeFormat("rfc3339")));
        if (e) return reject(`after ${kept.length}: ${e.message}`);
      }
      return emit({ kept: kept.length });
    }
    let ns, got;
    try {
      ns = this.time.parse(pairs.ts ?? "");
      got = jsonGet(pairs.json ?? "{}", "a.b", "tags.1");
    } catch (e) {
      return reject(e.message);
    }
    const m = this.patterns.match(pairs.line ?? "");
    const body = {
      pairs,
      rfc3339: formatRfc3339(ns),
      pattern: m === null ? null : m.pattern,
      captures: m === null ? null : m.captures,
      got: got.map((v) => (v === undefined ? null : v)),
      check: jsonObjectCheck(pairs.check ?? "{}"),
    };
    return emit(body, undefined, ns);
  }
}

export const { init, process } = exportPlugin(HelpersDemo);
