// Write sluice plugins in JavaScript: one class, one method.
//
// A plugin extends `Plugin` and overrides `process(record)`, returning
// `emit(...)`, `drop(reason)` or `reject(reason)`; `setup(config)` may
// refuse its config by throwing. The plugin module ends with
//
//     export const { init, process } = exportPlugin(MyPlugin);
//
// and jco builds it against sluice's WIT world:
//
//     jco componentize plugin.js --wit wit --world-name plugin -d http -d fetch-event -o plugin.wasm
//
// An exception thrown by `process` rejects that record only, with the
// exception as the reason; the rest of the batch goes on.
//
// How the WIT types look here: `list<u8>` is a Uint8Array, `s64`/`u64` are
// BigInts, an `option` is the value or undefined, a variant is
// `{ tag, val }` (a record's `position` is `{ tag: "kafka" | "file", val }`).

import { log } from "sluice:plugin/log@0.1.0";
import { now } from "sluice:plugin/clock@0.1.0";

const encoder = new TextEncoder();
const decoder = new TextDecoder("utf-8", { fatal: false });

/** A payload (Uint8Array) as text; invalid UTF-8 becomes U+FFFD. */
export function text(bytes) {
  return decoder.decode(bytes);
}

/** One event: `body` is an object (serialized to JSON), a JSON string or bytes. */
export function event(body, id, timestamp) {
  let bytes;
  if (body instanceof Uint8Array) bytes = body;
  else if (typeof body === "string") bytes = encoder.encode(body);
  else bytes = encoder.encode(JSON.stringify(body));
  return { id: id ?? undefined, timestamp: timestamp === undefined || timestamp === null ? undefined : BigInt(timestamp), body: bytes };
}

export function emit(body, id, timestamp) {
  return emitMany([event(body, id, timestamp)]);
}

/** Several events from one record (a split), or none. */
export function emitMany(events) {
  return { tag: "emit", val: events };
}

/** Filtered on purpose: counted per plugin and reason, never delivered. */
export function drop(reason) {
  return { tag: "drop", val: String(reason) };
}

/** Never valid: the record goes to the quarantine with this reason. */
export function reject(reason) {
  return { tag: "reject", val: String(reason) };
}

/** The host's clock, nanoseconds since the Unix epoch (a BigInt). */
export function nowNanos() {
  return now();
}

export function info(message) {
  log("info", String(message));
}

export function warn(message) {
  log("warn", String(message));
}

export class Plugin {
  setup(config) {
    this.config = config;
  }
  process(_record) {
    throw new Error("a plugin overrides process(record)");
  }
}

/** The two exports of sluice's world for a plugin class. */
export function exportPlugin(PluginClass) {
  let instance = null;
  return {
    init(config) {
      try {
        const plugin = new PluginClass();
        plugin.setup(JSON.parse(config));
        instance = plugin;
      } catch (e) {
        // result<_, string>: a thrown value is the error.
        throw e instanceof Error ? e.message : String(e);
      }
    },
    process(batch) {
      if (instance === null) return batch.map(() => reject("plugin used before init"));
      return batch.map((record) => {
        try {
          return instance.process(record);
        } catch (e) {
          return reject(e instanceof Error ? `${e.name}: ${e.message}` : String(e));
        }
      });
    },
  };
}
