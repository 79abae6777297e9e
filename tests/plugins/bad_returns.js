// A JavaScript plugin that returns what is not an outcome for some records
// (tests/tests/sdk_languages.rs): the SDK must reject those records alone,
// naming what was wrong, and pack the rest of the batch.
import { Plugin, emit, exportPlugin, text } from "./sluice-plugin.js";

class BadReturns extends Plugin {
  process(record) {
    const p = text(record.payload);
    if (p === "none") return null;
    if (p === "str-body") return { tag: "emit", val: [{ body: "not bytes" }] };
    if (p === "float-time") return { tag: "emit", val: [{ body: new Uint8Array([123, 125]), timestamp: 1.5 }] };
    if (p === "huge-time") return { tag: "emit", val: [{ body: new Uint8Array([123, 125]), timestamp: 1n << 70n }] };
    if (p === "raise") throw new Error("asked to");
    return emit({ line: p });
  }
}

export const { init, process } = exportPlugin(BadReturns);
