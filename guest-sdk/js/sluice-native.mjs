// A JavaScript plugin outside the component, for its unit tests:
//
//     node --import ./sluice-native.mjs test.mjs
//
// The SDK imports the host's interfaces (`sluice:plugin/log@0.2.0`,
// `clock`, `helpers`), which only exist inside the component. Imported
// first, this module registers a resolve hook that answers each of them
// with this same module, whose exports stand in for the host:
//
// - `log` writes to stderr and `now` is the system clock;
// - every helper (time formats, patterns, logfmt, JSON paths, the object
//   check, RFC 3339) is answered by the host's own code, through
//   `sluice plugin helpers` ($SLUICE, else `sluice` on the PATH): a
//   format, a zone or a pattern answers in a test exactly as in the
//   pipeline;
// - `schema` and `schemaReferences` answer what the test registered with
//   the SDK's `registerSchema` (there is no registry to fetch from).
//
// One process per call (Node has no synchronous pipe to a child), which
// is milliseconds: fine for unit tests, not for benchmarks.

import { spawnSync } from "node:child_process";
import { register } from "node:module";
import { isMainThread } from "node:worker_threads";

// Hooks run on a thread of their own, which loads this module too: only
// the main thread registers.
if (isMainThread) register(import.meta.url);

/** The resolve hook: the host's interfaces are this module; and a plugin
 * whose `./sluice-plugin.js` is copied in only at build time (the
 * conformance kit's demos) gets the SDK beside this file. */
export async function resolve(specifier, context, nextResolve) {
  if (specifier.startsWith("sluice:plugin/")) return { url: import.meta.url, shortCircuit: true };
  try {
    return await nextResolve(specifier, context);
  } catch (e) {
    if (specifier !== "./sluice-plugin.js") throw e;
    return { url: new URL("./sluice-plugin.js", import.meta.url).href, shortCircuit: true };
  }
}

// --- sluice:plugin/log and clock ----------------------------------------

export function log(level, message) {
  process.stderr.write(`${String(level).toUpperCase()} ${message}\n`);
}

export function now() {
  return BigInt(Date.now()) * 1000000n;
}

// --- sluice:plugin/helpers, answered by the host's code -----------------

/** A refusal, shaped like the host's (`e.payload` is the reason). */
function refusal(why) {
  return Object.assign(new Error(why), { payload: why });
}

function call(request) {
  const exe = process.env.SLUICE || "sluice";
  const out = spawnSync(exe, ["plugin", "helpers"], { input: JSON.stringify(request) + "\n", encoding: "utf8" });
  if (out.error) {
    throw new Error(
      `the helpers run the host's own code: put \`sluice\` on the PATH, or set SLUICE to its path (${out.error.message})`,
    );
  }
  const line = out.stdout.split("\n")[0];
  if (!line) throw new Error(`\`sluice plugin helpers\` answered nothing (exit ${out.status}): ${out.stderr}`);
  const answer = JSON.parse(line);
  if ("err" in answer) throw refusal(answer.err);
  return answer.ok;
}

const b64 = (bytes) => Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength).toString("base64");

export class TimeFormat {
  static compile(spec) {
    call({ call: "time-compile", spec });
    return new TimeFormat(spec);
  }
  constructor(spec) {
    this.spec = spec;
  }
  parse(text, nowNanos) {
    return BigInt(call({ call: "time-parse", spec: this.spec, text, now: String(nowNanos) }));
  }
}

export class Patterns {
  static compile(patterns) {
    call({ call: "patterns-compile", patterns });
    return new Patterns(patterns);
  }
  constructor(patterns) {
    this.patterns = patterns;
  }
  firstMatch(line) {
    const m = call({ call: "patterns-match", patterns: this.patterns, line });
    return m === null ? undefined : m;
  }
}

export function logfmtObject(line) {
  return call({ call: "logfmt-object", line_b64: b64(line) });
}

/** Outside the component there is no batch: the SDK asks record by record. */
export function logfmtBatch() {
  throw refusal("no batch outside the component");
}

export function jsonGet(payload, paths) {
  return call({ call: "json-get", payload_b64: b64(payload), paths }).map((v) => (v === null ? undefined : v));
}

export function jsonObjectCheck(payload) {
  return call({ call: "json-object-check", payload_b64: b64(payload) }) ?? undefined;
}

export function formatRfc3339(nanos) {
  return call({ call: "format-rfc3339", nanos: String(nanos) });
}

/** What the test registered (`registerSchema`), as the host answers an id
 * it holds; the host's words for one it does not. */
export function schema(id) {
  const found = schemas.get(id);
  if (found === undefined) throw refusal(`schema id ${id} is not in the schema registry`);
  return found;
}

/** The references the test registered with the schema. */
export function schemaReferences(id) {
  schema(id);
  return references.get(id) ?? [];
}

const schemas = new Map();
const references = new Map();

// --- The host's output rules, for runNatively ---------------------------

/** null when the host takes these events of a record with `payload`, else
 * the reason it rejects the record with (plugin/output_rules.rs). */
function judge(payload, events) {
  const described = events.map((e) => {
    if (e.id !== null && typeof e.id !== "string") throw new TypeError("id");
    return { id: e.id, timestamp: e.timestamp, keep: e.keep, body_b64: b64(e.body), sinks: e.sinks };
  });
  return call({ call: "judge", payload_b64: b64(payload), events: described }) ?? null;
}

// Not an import of the WIT world (a component has no such function):
// the SDK's runNatively finds it here, on the main thread that imported
// this module.
globalThis.__sluiceNative = { judge, schemas, references };
