// The conformance plugin (conformance/SPEC.md) in JavaScript.
import { Plugin, drop, emit, emitMany, event, exportPlugin, keep, reject, text } from "./sluice-plugin.js";

const hex = (bytes) => Array.from(bytes, (b) => b.toString(16).padStart(2, "0")).join("");
// Bytes shown (SPEC.md): hex up to 32 bytes, else length and sum.
const shown = (bytes) => {
  if (bytes.length <= 32) return hex(bytes);
  let sum = 0;
  for (const b of bytes) sum = (sum + b) % 4294967296;
  return `${bytes.length} bytes, sum ${sum}`;
};
const startsWith = (bytes, prefix) => prefix.length <= bytes.length && prefix.every((c, i) => bytes[i] === c);
const ascii = (s) => Array.from(s, (c) => c.charCodeAt(0));

class Conformance extends Plugin {
  setup(config) {
    if (typeof config.refuse === "string") throw new Error(config.refuse);
    this.tag = config.tag ?? "";
  }

  process(record) {
    const p = record.payload;
    if (startsWith(p, ascii('{"keep"'))) return keep(record);
    if (startsWith(p, ascii("drop:"))) return drop(text(p.subarray(5)));
    if (startsWith(p, ascii("reject:"))) return reject(text(p.subarray(7)));
    if (startsWith(p, ascii("route:"))) {
      const names = text(p.subarray(6));
      return emit({ route: names }, undefined, undefined, names.split(","));
    }
    if (startsWith(p, ascii("split:"))) {
      const n = parseInt(text(p.subarray(6)), 10);
      const base = record.eventId ?? "none";
      return emitMany(Array.from({ length: n }, (_, k) => event({ k }, `${base}/${k}`)));
    }
    const pos = record.position;
    const where = `${pos.source}:${pos.partition}@${pos.offset}`;
    let sum = 0;
    for (const b of p) sum = (sum + b) % 4294967296;
    const body = {
      tag: this.tag,
      len: p.length,
      sum,
      head: hex(p.subarray(0, 8)),
      key: record.key === undefined ? null : shown(record.key),
      headers: record.headers.map(([k, v]) => [k, shown(v)]),
      position: where,
    };
    return emit(body, record.eventId, record.timestamp ?? record.sourceTimestamp);
  }
}

export const { init, process } = exportPlugin(Conformance);
