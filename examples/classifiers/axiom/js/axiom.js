// Axiom's ingest answers, read per record (../rust/src/lib.rs says why):
// a failure names the time of the event it refused, so it is matched to
// the one record sent with that time; otherwise split.
import { Classifier, accepted, all, each, exportClassifier, reject, split, systemic } from "./sluice-classifier.js";

const RFC3339 = /^(\d{4})-(\d\d)-(\d\d)[Tt ](\d\d):(\d\d):(\d\d)(?:\.(\d+))?(?:([Zz])|([+-])(\d\d):(\d\d))$/;

function daysFromCivil(y, m, d) {
  if (m <= 2) y -= 1;
  const era = Math.floor(y / 400);
  const yoe = y - era * 400;
  const doy = Math.floor((153 * ((m + 9) % 12) + 2) / 5) + d - 1;
  return era * 146097 + yoe * 365 + Math.floor(yoe / 4) - Math.floor(yoe / 100) + doy - 719468;
}

/** `2024-05-01T12:00:01.5Z` (or with an offset) as BigInt ns, or undefined. */
export function rfc3339Nanos(text) {
  const m = RFC3339.exec(text ?? "");
  if (!m) return undefined;
  const [y, mo, d, h, mi, s] = m.slice(1, 7).map(Number);
  const frac = BigInt((m[7] ?? "").slice(0, 9).padEnd(9, "0"));
  let offset = 0;
  if (m[9]) {
    offset = Number(m[10]) * 3600 + Number(m[11]) * 60;
    if (m[9] === "-") offset = -offset;
  }
  const secs = daysFromCivil(y, mo, d) * 86400 + h * 3600 + mi * 60 + s - offset;
  return BigInt(secs) * 1000000000n + frac;
}

class Axiom extends Classifier {
  classify(request, response) {
    const n = request.length;
    if ([400, 413, 422].includes(response.status)) return split(response.excerpt());
    if (response.status < 200 || response.status > 299) return all(systemic(response.excerpt()));
    let ingest;
    try {
      ingest = response.json();
      if (typeof ingest?.ingested !== "number" || typeof ingest?.failed !== "number") {
        throw new Error("no ingested and failed counts");
      }
    } catch (e) {
      return all(systemic(`HTTP ${response.status}: ${e.message}`));
    }
    const { ingested, failed } = ingest;
    const failures = ingest.failures ?? [];
    if (ingested + failed !== n) {
      return all(systemic(`Axiom counted ${ingested} ingested and ${failed} failed of the ${n} sent`));
    }
    if (failed === 0) return all(accepted());
    const first = failures.length > 0 ? (failures[0].error ?? "") : "no failure listed";
    const whole = split(`axiom: ${failed} of ${n} failed: ${first}`);
    if (failures.length !== failed) return whole;
    // One pass over the request: each time to its record, or to null when
    // two records share it (which one failed is then unknown).
    const byTime = new Map();
    for (let i = 0; i < n; i++) {
      const ns = request.timestamp(i);
      if (ns !== undefined) byTime.set(ns, byTime.has(ns) ? null : i);
    }
    const fates = Array.from({ length: n }, accepted);
    for (const f of failures) {
      const ns = rfc3339Nanos(f.timestamp);
      const i = ns === undefined ? undefined : byTime.get(ns);
      if (i === undefined || i === null || fates[i].tag !== "accepted") return whole;
      fates[i] = reject(`axiom: ${f.error ?? ""}`);
    }
    return each(fates);
  }
}

export const { init, classify } = exportClassifier(Axiom);
