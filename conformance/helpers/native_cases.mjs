// The helpers cases, run natively: the JavaScript helpers demo in Node (no
// component, no build), its helpers answered by the host's own code
// through `sluice plugin helpers` ($SLUICE or the PATH). A case that passes
// here and through the built component proves a plugin's unit tests see
// what the pipeline sees.
//
//     node --import ./guest-sdk/js/sluice-native.mjs conformance/helpers/native_cases.mjs \
//          conformance/helpers/cases/0[1235]-*.json
//
// Case 04 (attacks) is not run natively: its bounds are an instance's
// (live resources, memory), which only the component has. Prints one line
// per case; exits 1 when any fails.
import { readFileSync } from "node:fs";
import { basename } from "node:path";
import { isDeepStrictEqual } from "node:util";

import { formatRfc3339, runNatively } from "../../guest-sdk/js/sluice-plugin.js";
import { HelpersDemo } from "./helpers_demo.js";

const show = (v) => JSON.stringify(v);

/** null when `outcome` is what `want` (a case's expected outcome, in the
 * words config cases use) says; else why not. */
function check(outcome, want) {
  for (const [verdict, door] of [["drop", "drop"], ["reject", "quarantine"]]) {
    if (door in want) {
      return outcome.verdict === verdict && outcome.reason.includes(want[door])
        ? null
        : `want ${door} containing ${show(want[door])}, got ${outcome.verdict} ${show(outcome.reason)}`;
    }
  }
  const events = "event" in want ? [want.event] : want.events;
  if (outcome.verdict !== "emit" || outcome.events.length !== events.length) {
    return `want ${events.length} event(s), got ${outcome.verdict} ${show(outcome.reason)}`;
  }
  for (const [i, e] of events.entries()) {
    const got = outcome.events[i];
    if ((e.id ?? undefined) !== got.id) return `id: want ${show(e.id)}, got ${show(got.id)}`;
    if (e.timestamp != null && formatRfc3339(got.timestamp) !== e.timestamp) {
      return `timestamp: want ${e.timestamp}, got ${formatRfc3339(got.timestamp)}`;
    }
    const body = got.json();
    if ("body" in e && !isDeepStrictEqual(body, e.body)) return `body: want ${show(e.body)}, got ${show(body)}`;
    for (const [k, v] of Object.entries(e.fields ?? {})) {
      if (!isDeepStrictEqual(body[k], v)) return `${k}: want ${show(v)}, got ${show(body[k])}`;
    }
  }
  return null;
}

let failed = 0;
for (const path of process.argv.slice(2)) {
  const c = JSON.parse(readFileSync(path, "utf8"));
  const refusal = Array.isArray(c.expect) ? undefined : c.expect.init_error;
  let why = [];
  let outcomes = null;
  try {
    // The case's `now` pins the clock, as `sluice plugin test` does.
    const records = c.records ?? c.input ?? [];
    outcomes = runNatively(HelpersDemo, c.config ?? {}, records.map((r) => (typeof r === "string" ? r : r.payload)), {
      now: c.now,
    });
  } catch (e) {
    if (refusal === undefined) throw e;
    if (!String(e.message).includes(refusal)) why.push(`setup refused with ${show(e.message)}, expected ${show(refusal)}`);
  }
  if (outcomes !== null && refusal !== undefined) {
    why.push(`setup accepted the config; expected a refusal containing ${show(refusal)}`);
  } else if (outcomes !== null) {
    const wants = c.expect;
    why = wants
      .map((w, i) => (i < outcomes.length ? check(outcomes[i], w) : "no outcome"))
      .map((w, i) => w && `record ${i}: ${w}`)
      .filter(Boolean);
    if (outcomes.length !== wants.length) why.push(`${wants.length} outcomes expected, ${outcomes.length} given`);
  }
  console.log(`${why.length ? "FAIL" : "ok  "} ${basename(path)}${why.map((w) => "\n     " + w).join("")}`);
  if (why.length) failed++;
}
process.exit(failed ? 1 : 0);
