// Write sluice plugins in JavaScript: one class, one method.
//
// A plugin extends `Plugin` and overrides `process(record)`, returning
// `emit(...)`, `drop(reason)` or `reject(reason)`; `setup(config)` may
// refuse its config by throwing. The plugin module ends with
//
//     export const { init, process } = exportPlugin(MyPlugin);
//
// and componentize-js builds it against sluice's WIT world
// (`node build.mjs plugin.js plugin.wasm wit`).
//
// An exception thrown by `process` rejects that record only, with the
// exception as the reason; the rest of the batch goes on.
//
// A record here: `payload` and `key` are Uint8Arrays (views of the batch,
// valid during the call: copy one to keep it), `headers` is a list of
// [name, Uint8Array], timestamps are BigInt nanoseconds or undefined, and
// `position` is `{ source, partition, offset }` (`offset` a BigInt).
//
// The host's native helpers (`sluice:plugin/helpers`) are ordinary
// functions here: `logfmt(line)`, `jsonGet(payload, ...paths)`,
// `jsonObjectCheck(payload)`, `formatRfc3339(nanos)`, and
// `new TimeFormat(spec).parse(text)` and `new Patterns([...]).match(line)`,
// compiled once in `setup`. They run natively in the host, so a parser
// built on them costs the interpreter one call per record, not a loop.
//
// This SDK speaks `sluice:plugin@0.2.0`: a batch arrives as a few byte
// buffers (the layout is in `wit/plugin.wit`). Each record handed to
// `process` reads its fields from them when asked (a plugin pays only for
// what it reads); the outcomes are packed back into buffers that are kept
// and reused from batch to batch.

import { log } from "sluice:plugin/log@0.2.0";
import { now } from "sluice:plugin/clock@0.2.0";
import {
  TimeFormat as HostTimeFormat,
  Patterns as HostPatterns,
  logfmtObject as hostLogfmtObject,
  logfmtBatch as hostLogfmtBatch,
  jsonGet as hostJsonGet,
  jsonObjectCheck as hostJsonObjectCheck,
  formatRfc3339 as hostFormatRfc3339,
  schema as hostSchema,
  schemaReferences as hostSchemaReferences,
} from "sluice:plugin/helpers@0.2.0";

const encoder = new TextEncoder();
const decoder = new TextDecoder("utf-8", { fatal: false });
const strict = new TextDecoder("utf-8", { fatal: true });
const ENCODE_INTO = typeof encoder.encodeInto === "function";

const RECORD = 64;
const KEY = 1, SOURCE_TS = 2, EVENT_ID = 4, TS = 8;
const EMIT = 0, DROP = 1, REJECT = 2;
const EV_ID = 1, EV_TS = 2, EV_KEEP = 4, EV_SINKS = 8;

/** A payload (Uint8Array) as text; invalid UTF-8 becomes U+FFFD. */
export function text(bytes) {
  return decoder.decode(bytes);
}

/**
 * One event: `body` is an object (serialized to JSON), a JSON string or
 * bytes. `sinks`, a list of sink names (`[[sinks]]`), sends it there and
 * only there, over the config's routes; a name the pipeline has no sink
 * for quarantines the record.
 */
export function event(body, id, timestamp, sinks) {
  let bytes;
  if (ArrayBuffer.isView(body)) bytes = new Uint8Array(body.buffer, body.byteOffset, body.byteLength);
  // Text stays text until it is packed, where it is encoded straight into
  // the outcome buffer: no array per body.
  else if (typeof body === "string") bytes = body;
  else bytes = JSON.stringify(body);
  return {
    // A number is a natural id: its digits.
    id: typeof id === "number" || typeof id === "bigint" ? String(id) : id ?? undefined,
    timestamp: timestamp === undefined || timestamp === null ? undefined : BigInt(timestamp),
    body: bytes,
    sinks: sinks ?? undefined,
  };
}

export function emit(body, id, timestamp, sinks) {
  return { tag: "emit", val: [event(body, id, timestamp, sinks)] };
}

/**
 * The record goes on unchanged: one event whose body is its payload, with
 * the id and timestamp an earlier stage set unless given here. Its bytes
 * never cross back to the host (the contract's *keep* flag): the fastest
 * outcome there is, for filters, validators and id or timestamp setters.
 */
export function keep(record, id, timestamp, sinks) {
  return emitMany([{ ...event(EMPTY, id, timestamp, sinks), keep: true }]);
}
const EMPTY = new Uint8Array(0);

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

// A unit test's clock (`pinNow`, `runNatively`'s `now`): in the host, a
// case's `now` pins the clock the host hands out instead.
let pinned = null;

/**
 * Natively, make `nowNanos()` and the clock `TimeFormat.parse` reads (a
 * yearless format's year) answer `nanos`: a BigInt or integer, or RFC 3339
 * text (`"2026-12-01T12:00:00Z"`) as a case's `now`; null for the real
 * clock again.
 */
export function pinNow(nanos) {
  if (nanos === null || nanos === undefined) pinned = null;
  else if (typeof nanos === "string" && !/^-?[0-9]+$/.test(nanos)) pinned = new TimeFormat("rfc3339").parse(nanos);
  else pinned = nanosArg(nanos, "pinNow");
  // The clock a parse read before (the text above, say) is not this one.
  batchNow = null;
}

/** The host's clock, nanoseconds since the Unix epoch (a BigInt). */
export function nowNanos() {
  return pinned ?? now();
}

export function info(message) {
  log("info", typeof message === "string" ? message : String(message));
}

export function warn(message) {
  log("warn", typeof message === "string" ? message : String(message));
}

// --- Native helpers (sluice:plugin/helpers) ------------------------------
//
// Work a parser repeats per record, run by the host natively: the
// interpreter pays one call instead of a loop. The same code serves sluice's
// own plugins, so a format, a zone or a pattern means the same here.

// The host's clock, read once per batch (and only when a time is parsed):
// a yearless format needs it, and a host call per record would cost more
// than the parse.
let batchNow = null;

// The payload a record last handed out, and that record's index: when the
// plugin asks `logfmt` of exactly that view, the answer comes from one
// `logfmt-batch` call for the whole batch, parsed once into one object per
// record (kept here until the next batch), instead of a host call and a
// `JSON.parse` per record.
let lastPayload = null, lastIndex = 0, batchPairs = null;

// What each helper takes, checked here and not by the bindings: a value
// the bindings cannot lower would fail inside the host call, where a
// TypeError rejects the one record and names the plugin's line.

function kind(value) {
  if (value === null) return "null";
  if (Array.isArray(value)) return "an array";
  const t = typeof value === "object" ? value.constructor?.name ?? "object" : typeof value;
  return /^[aeiouAEIOU]/.test(t) ? `an ${t}` : `a ${t}`;
}

/** A string, or bytes (a record's payload) read as UTF-8; a number as its
 * digits. */
function textArg(value, what) {
  if (typeof value === "string") return value;
  if (ArrayBuffer.isView(value)) return decoder.decode(value);
  if (typeof value === "number" || typeof value === "bigint") return String(value);
  throw new TypeError(`${what} takes a string or a Uint8Array, not ${kind(value)}`);
}

/** A list of strings; a lone string is one item, not its letters. */
function textsArg(values, what) {
  if (typeof values === "string" || ArrayBuffer.isView(values)) values = [values];
  if (values === null || typeof values !== "object" || typeof values[Symbol.iterator] !== "function") {
    throw new TypeError(`${what} takes an array of strings, not ${kind(values)}`);
  }
  return Array.from(values, (v, i) => {
    if (typeof v !== "string" && !ArrayBuffer.isView(v)) throw new TypeError(`${what}: item ${i} is ${kind(v)}, not a string`);
    return textArg(v, what);
  });
}

/** Whole nanoseconds in the 64-bit range: a BigInt, an integer, or digits. */
function nanosArg(value, what) {
  let n;
  if (typeof value === "bigint") n = value;
  else if (typeof value === "number" && Number.isInteger(value)) n = BigInt(value);
  else if (typeof value === "string" && /^-?[0-9]+$/.test(value.trim())) n = BigInt(value.trim());
  else if (typeof value === "number" || typeof value === "string") throw new RangeError(`${what} takes whole nanoseconds, not ${JSON.stringify(value)}`);
  else throw new TypeError(`${what} takes nanoseconds (a BigInt or an integer), not ${kind(value)}`);
  if (n < MIN_NS || n > MAX_NS) throw new RangeError(`${what}: ${n} is out of the 64-bit range of nanoseconds`);
  return n;
}

function hostError(e) {
  return new Error(e && e.payload !== undefined ? String(e.payload) : String(e));
}

/** Bytes to hand the host: the batch's arrays come from the host's side
 * (`instanceof Uint8Array` is false for them), so views are told by
 * `ArrayBuffer.isView`; a view into a larger buffer (a record's payload in
 * the batch) crosses as a copy of its own bytes. */
function bytesOf(value, what) {
  if (typeof value === "string") return encoder.encode(value);
  if (!ArrayBuffer.isView(value)) throw new TypeError(`${what} takes a Uint8Array or a string, not ${kind(value)}`);
  const view = new Uint8Array(value.buffer, value.byteOffset, value.byteLength);
  return value.byteOffset === 0 && value.byteLength === value.buffer.byteLength ? view : view.slice();
}

/**
 * A timestamp format compiled once (in `setup`), parsed per record. `spec`
 * is a format name or pattern (`"rfc3339"`, `"%Y-%m-%d %H:%M:%S"`: the
 * docs/src/plugins.md, "Timestamps"), or an object of it with its rule:
 * `{ format: "%Y-%m-%d %H:%M:%S", zone: "Europe/Berlin" }`. A spec the
 * host refuses throws, naming what is wrong.
 */
export class TimeFormat {
  constructor(spec) {
    let text;
    if (typeof spec === "string" || ArrayBuffer.isView(spec)) text = textArg(spec, "TimeFormat");
    else if (spec !== null && typeof spec === "object" && !Array.isArray(spec)) text = JSON.stringify(spec);
    else throw new TypeError(`TimeFormat takes a format (a string) or an object of it with its rule, not ${kind(spec)}`);
    try {
      this.format = HostTimeFormat.compile(text);
    } catch (e) {
      throw hostError(e);
    }
  }
  /** `text` (a string, or a Uint8Array such as a record's payload, read
   * as UTF-8; a number as its digits) as BigInt nanoseconds since the
   * epoch; throws naming why not. */
  parse(text) {
    const line = textArg(text, "TimeFormat.parse");
    try {
      batchNow ??= nowNanos();
      return this.format.parse(line, batchNow);
    } catch (e) {
      throw hostError(e);
    }
  }
}

/**
 * `%{SHORTCUT:name}` patterns (the pattern plugin's engine and shortcuts),
 * compiled once in `setup`, tried in order: `match(line)` answers
 * `{ pattern, captures }` (captures an object of name → text) of the
 * first that matches, or null.
 */
export class Patterns {
  constructor(patterns) {
    const list = textsArg(patterns, "Patterns");
    try {
      this.set = HostPatterns.compile(list);
    } catch (e) {
      throw hostError(e);
    }
  }
  /** `line`: a string, or a Uint8Array (a record's payload) read as UTF-8. */
  match(line) {
    const m = this.set.firstMatch(textArg(line, "Patterns.match"));
    return m === undefined || m === null ? null : { pattern: m.pattern, captures: Object.fromEntries(m.captures) };
  }
}

/**
 * The `key=value` pairs of a logfmt line (a Uint8Array or a string) as an
 * object: quoted values may hold spaces and `\"`; a bare key maps to true;
 * a later key replaces an earlier one.
 */
export function logfmt(line) {
  // One JSON text and the engine's own parser: a list of pairs lifted
  // element by element costs several times as much.
  if (line === lastPayload) {
    if (batchPairs === null) {
      try {
        // JSON Lines into one JSON array: a raw newline is never inside
        // a JSON text, so each is a boundary between two records.
        batchPairs = JSON.parse("[" + hostLogfmtBatch().replaceAll("\n", ",") + "]");
      } catch (_) {
        // Past the memory limit as one text: record by record, below.
        batchPairs = [];
      }
    }
    // Each object is handed out once: a second call for the same record
    // gets a fresh one, as it would record by record.
    const pairs = batchPairs[lastIndex];
    if (pairs !== undefined && pairs !== null) {
      batchPairs[lastIndex] = null;
      return pairs;
    }
  }
  return JSON.parse(hostLogfmtObject(bytesOf(line, "logfmt")));
}

/**
 * The values at dotted paths (`"user.id"`, `"tags.0"`) of the JSON object
 * `payload`, one per path, undefined where it holds nothing; the payload
 * is parsed by the host. Throws when it is not one JSON object.
 */
export function jsonGet(payload, ...paths) {
  // jsonGet(p, ["a", "b"]): the array is the paths.
  const list = textsArg(paths.length === 1 && Array.isArray(paths[0]) ? paths[0] : paths, "jsonGet's paths");
  const data = bytesOf(payload, "jsonGet");
  let found;
  try {
    found = hostJsonGet(data, list);
  } catch (e) {
    throw hostError(e);
  }
  return found.map((v) => (v === undefined || v === null ? undefined : JSON.parse(v)));
}

/** null when `payload` is one JSON object in UTF-8; else why not. */
export function jsonObjectCheck(payload) {
  return hostJsonObjectCheck(bytesOf(payload, "jsonObjectCheck")) ?? null;
}

/** Nanoseconds since the epoch as RFC 3339 in UTC, as sinks write it. */
export function formatRfc3339(nanos) {
  return hostFormatRfc3339(nanosArg(nanos, "formatRfc3339"));
}

/** The reason to reject a record that `framed` finds no header in. */
export const NOT_FRAMED =
  "not in the schema registry's wire format: a record starts with a zero byte and a 4-byte schema id";

/**
 * A payload framed for a schema registry (Confluent's wire format: a zero
 * byte, the schema id in 4 bytes big-endian, the encoded record):
 * `{ id, body }`, `body` a view of the bytes after the header; null when
 * the payload is not framed. Reject such a record with `NOT_FRAMED`.
 */
export function framed(payload) {
  if (!ArrayBuffer.isView(payload)) throw new TypeError(`framed takes a Uint8Array (a record's payload), not ${kind(payload)}`);
  const bytes = new Uint8Array(payload.buffer, payload.byteOffset, payload.byteLength);
  if (bytes.length < 5 || bytes[0] !== 0) return null;
  const id = ((bytes[1] << 24) >>> 0) + (bytes[2] << 16) + (bytes[3] << 8) + bytes[4];
  return { id, body: bytes.subarray(5) };
}

/** A schema id: a whole number in 0..2^32-1. */
function schemaIdArg(value, what) {
  if (typeof value !== "number" && typeof value !== "bigint") {
    throw new TypeError(`${what} takes a schema id (a number), not ${kind(value)}`);
  }
  if (typeof value === "number" && !Number.isInteger(value)) throw new RangeError(`${what}: ${value} is not a whole schema id`);
  const n = BigInt(value);
  if (n < 0n || n > 0xffffffffn) throw new RangeError(`${what}: ${n} is not a schema id (0 to 4294967295)`);
  return Number(n);
}

/**
 * The schema the registry holds under `id` (what `framed` read):
 * `{ schemaType, text }`, the type `AVRO`, `PROTOBUF` or `JSON`. No I/O:
 * the host fetched every id of the batch before the plugin was called.
 * Throws the host's reason, a good reject reason as it is, when the
 * registry has no such schema, the host never fetched `id`, or the
 * pipeline has no `[schema_registry]`. Ask once per new id and keep what
 * you parse: an id never changes what it means.
 */
export function schema(id) {
  const n = schemaIdArg(id, "schema");
  let got;
  try {
    got = hostSchema(n);
  } catch (e) {
    throw hostError(e);
  }
  return { schemaType: got[0], text: got[1] };
}

/**
 * The schemas the one under `id` references (Confluent's schema
 * references: an Avro named type, a Protobuf import, a JSON Schema `$ref`
 * kept under another subject), as `[{ name, text }]`: every one the
 * references reach, each before any that needs it, the order to parse
 * them in. Empty for a schema with none. Throws as `schema`.
 */
export function schemaReferences(id) {
  const n = schemaIdArg(id, "schemaReferences");
  let got;
  try {
    got = hostSchemaReferences(n);
  } catch (e) {
    throw hostError(e);
  }
  return Array.from(got, ([name, text]) => ({ name, text }));
}

/**
 * For a plugin's unit tests under `node --import ./sluice-native.mjs`:
 * what `schema(id)` (and, with `references` as `[name, text]` pairs,
 * `schemaReferences(id)`) answers from now on. In a pipeline the host
 * fetches schemas from the registry instead.
 */
export function registerSchema(id, schemaType, text, references = []) {
  const native = globalThis.__sluiceNative;
  if (!(native?.schemas instanceof Map)) {
    throw new Error("registerSchema is for unit tests under node --import ./sluice-native.mjs; in a pipeline the host fetches schemas from [schema_registry]");
  }
  const n = schemaIdArg(id, "registerSchema");
  native.schemas.set(n, [textArg(schemaType, "registerSchema"), textArg(text, "registerSchema")]);
  native.references.set(
    n,
    Array.from(references, (pair) => {
      if (!Array.isArray(pair) || pair.length !== 2) throw new TypeError(`registerSchema's references are [name, text] pairs, not ${kind(pair)}`);
      return [textArg(pair[0], "registerSchema"), textArg(pair[1], "registerSchema")];
    }),
  );
}

export class Plugin {
  /**
   * The config keys `setup` reads, when the plugin lists them (`static
   * configKeys = ["field"]`): any other key is refused at start, by name.
   * Without it every key is accepted.
   */
  static configKeys = null;

  setup(config) {
    this.config = config;
  }
  process(_record) {
    throw new Error("a plugin overrides process(record)");
  }
}

/** A byte buffer that grows by doubling and is reused across batches. */
class Bytes {
  constructor(size) {
    this.bytes = new Uint8Array(size);
    this.len = 0;
  }
  /** Room for `n` more bytes. */
  room(n) {
    if (this.len + n > this.bytes.length) {
      let size = this.bytes.length * 2;
      while (size < this.len + n) size *= 2;
      const bigger = new Uint8Array(size);
      bigger.set(this.bytes.subarray(0, this.len));
      this.bytes = bigger;
    }
    return this.bytes;
  }
  /** Append bytes; returns their offset. The capacity is checked here,
   * not in a call of `room`: a call costs an interpreter more than the
   * comparison. */
  put(b) {
    const at = this.len;
    (at + b.length > this.bytes.length ? this.room(b.length) : this.bytes).set(b, at);
    this.len = at + b.length;
    return at;
  }
  /** Append `text` as UTF-8 (at most three bytes per UTF-16 unit),
   * encoded in place: no array per string; returns its length. */
  putText(text) {
    const at = this.len;
    if (ENCODE_INTO) {
      const n = text.length * 3;
      const bytes = at + n > this.bytes.length ? this.room(n) : this.bytes;
      const { written } = encoder.encodeInto(text, bytes.subarray(at));
      this.len = at + written;
      return written;
    }
    const raw = encoder.encode(text);
    this.put(raw);
    return raw.length;
  }
  take() {
    return this.bytes.subarray(0, this.len);
  }
}

/** A table of 32-bit words (the descriptors), grown like `Bytes`: writing
 * an array element is far cheaper in an interpreter than a DataView call. */
class Words {
  constructor(size) {
    this.words = new Uint32Array(size);
    this.len = 0;
  }
  room(n) {
    if (this.len + n > this.words.length) {
      let size = this.words.length * 2;
      while (size < this.len + n) size *= 2;
      const bigger = new Uint32Array(size);
      bigger.set(this.words.subarray(0, this.len));
      this.words = bigger;
    }
    return this.words;
  }
  take() {
    return new Uint8Array(this.words.buffer, 0, this.len * 4);
  }
}

const outOutcomes = new Words(1 << 12), outEvents = new Words(1 << 13), outData = new Bytes(1 << 16);

/** 32-bit and 64-bit views of a buffer, copied first when it is not
 * aligned for them (componentize-js lifts each list into its own buffer,
 * so in practice it always is). */
function views(bytes) {
  const b = bytes.byteOffset % 8 === 0 ? bytes : bytes.slice();
  return [new Uint32Array(b.buffer, b.byteOffset, b.byteLength >> 2), new BigInt64Array(b.buffer, b.byteOffset, b.byteLength >> 3)];
}

/** A record of a batch, its fields read from the buffers when the plugin
 * asks for them: in an interpreter, building every field of every record
 * costs more than most plugins' own work, so a plugin pays only for the
 * fields it reads. */
class BatchRecord {
  constructor(b, i) {
    this.b = b;
    this.i = i;
  }
  slice(at) {
    const u = this.b.u32;
    return this.b.data.subarray(u[at], u[at] + u[at + 1]);
  }
  flag(bit) {
    return (this.b.u32[this.i * 16 + 15] & bit) !== 0;
  }
  get payload() {
    const u = this.b.u32, at = this.i * 16;
    const view = this.b.data.subarray(u[at], u[at] + u[at + 1]);
    lastPayload = view;
    lastIndex = this.i;
    return view;
  }
  get key() {
    return this.flag(KEY) ? this.slice(this.i * 16 + 2) : undefined;
  }
  get headers() {
    const { u32, h32, data } = this.b;
    const k = this.i * 16;
    const out = [];
    for (let h = u32[k + 4], end = h + u32[k + 5]; h < end; h++) {
      const at = h * 4;
      out.push([strict.decode(data.subarray(h32[at], h32[at] + h32[at + 1])), data.subarray(h32[at + 2], h32[at + 2] + h32[at + 3])]);
    }
    return out;
  }
  get sourceTimestamp() {
    return this.flag(SOURCE_TS) ? this.b.i64[this.i * 8 + 4] : undefined;
  }
  get timestamp() {
    return this.flag(TS) ? this.b.i64[this.i * 8 + 5] : undefined;
  }
  get eventId() {
    return this.flag(EVENT_ID) ? strict.decode(this.slice(this.i * 16 + 6)) : undefined;
  }
  get position() {
    const p = this.b.partitions[this.b.u32[this.i * 16 + 14]];
    return { source: p.source, partition: p.name, offset: this.b.i64[this.i * 8 + 6] };
  }
}

// Nothing is checked up front: the host packs with the tested layout of
// sluice-abi, and a bad slice or index could only make a field read throw
// or come back short, which the record's own outcome then shows.
function unpack(batch) {
  const [u32, i64] = views(batch.records);
  const [h32] = views(batch.headers);
  return { u32, i64, h32, data: batch.data, partitions: batch.partitions };
}

/** Why an outcome could not be packed, for the rejection of its record. */
function fault(o) {
  if (o === null || typeof o !== "object" || (o.tag !== "emit" && o.tag !== "drop" && o.tag !== "reject")) {
    return `process returned ${o === null ? "null" : typeof o}, not emit(...), drop(...) or reject(...)`;
  }
  if (o.tag !== "emit") return "a drop or reject reason must be a string";
  if (!Array.isArray(o.val)) return "emitMany takes a list of events";
  for (let k = 0; k < o.val.length; k++) {
    const e = o.val[k];
    if (e === null || typeof e !== "object" || !(e.body instanceof Uint8Array || typeof e.body === "string")) {
      return `event ${k} is not an event(...) (its body must be a Uint8Array or a string)`;
    }
    if (e.id !== undefined && typeof e.id !== "string") return `event ${k}: id is not a string`;
    if (e.timestamp !== undefined && typeof e.timestamp !== "bigint") return `event ${k}: timestamp is not a BigInt`;
    if (e.timestamp !== undefined && (e.timestamp < MIN_NS || e.timestamp > MAX_NS)) {
      return `event ${k}: timestamp is out of the 64-bit range (nanoseconds since the epoch)`;
    }
    if (e.sinks !== undefined && !(typeof e.sinks === "string" || Array.isArray(e.sinks))) {
      return `event ${k}: sinks is not a list of sink names`;
    }
  }
  return "process returned an outcome that cannot be packed";
}

const LOW = 0xffffffffn;
const NO_LENGTH = new Uint8Array(4);
const MIN_NS = -(1n << 63n), MAX_NS = (1n << 63n) - 1n;

/** One outcome into the tables; throws on a value that is not one. Indexed
 * loops and no object per event: in an interpreter the iterator protocol
 * and a small allocation cost more than the writes themselves. */
function packOne(o, count) {
  if (o.tag === "emit") {
    const first = count;
    const list = o.val;
    for (let k = 0; k < list.length; k++) {
      const e = list[k];
      let flags = 0, io = 0, il = 0;
      const id = e.id;
      if (id !== undefined) {
        if (typeof id !== "string") throw new TypeError("id");
        flags = EV_ID;
        io = outData.len;
        il = outData.putText(id);
      }
      const body = e.body;
      const kept = e.keep === true;
      if (kept) flags |= EV_KEEP;
      // A kept event's body is its record's payload: (0, 0), nothing
      // written, whatever `body` holds.
      let bo = 0, bl = 0;
      if (typeof body === "string") {
        if (!kept) {
          bo = outData.len;
          bl = outData.putText(body);
          if (bl === 0) bo = 0;
        }
      } else if (body instanceof Uint8Array) {
        bl = kept ? 0 : body.length;
        if (bl > 0) bo = outData.put(body);
      } else {
        throw new TypeError("body");
      }
      let lo = 0, hi = 0;
      const ts = e.timestamp;
      if (ts !== undefined) {
        if (typeof ts !== "bigint" || ts < MIN_NS || ts > MAX_NS) throw new TypeError("timestamp");
        flags |= EV_TS;
        lo = Number(ts & LOW);
        hi = Number((ts >> 32n) & LOW);
      }
      // A route: a length, then the names joined by "," (flag bit 3).
      let ro = 0;
      const sinks = e.sinks;
      if (sinks !== undefined) {
        if (typeof sinks !== "string" && !Array.isArray(sinks)) throw new TypeError("sinks");
        flags |= EV_SINKS;
        ro = outData.put(NO_LENGTH);
        const n = outData.putText(typeof sinks === "string" ? sinks : sinks.join(","));
        new DataView(outData.bytes.buffer).setUint32(ro, n, true);
      }
      const at = outEvents.len;
      const w = at + 8 > outEvents.words.length ? outEvents.room(8) : outEvents.words;
      w[at] = io;
      w[at + 1] = il;
      w[at + 2] = bo;
      w[at + 3] = bl;
      w[at + 4] = lo;
      w[at + 5] = hi;
      w[at + 6] = flags;
      w[at + 7] = ro;
      outEvents.len = at + 8;
      count++;
    }
    const at = outOutcomes.len;
    const w = at + 3 > outOutcomes.words.length ? outOutcomes.room(3) : outOutcomes.words;
    w[at] = EMIT;
    w[at + 1] = first;
    w[at + 2] = count - first;
    outOutcomes.len = at + 3;
    return count;
  }
  if (o.tag !== "drop" && o.tag !== "reject") throw new TypeError("tag");
  reason(o.tag === "drop" ? DROP : REJECT, o.val);
  return count;
}

function reason(kind, text) {
  const at = outData.len;
  const len = outData.putText(String(text));
  const w = outOutcomes.room(3);
  w[outOutcomes.len] = kind;
  w[outOutcomes.len + 1] = at;
  w[outOutcomes.len + 2] = len;
  outOutcomes.len += 3;
}

/** Each record through the plugin and its outcome straight into the
 * tables: one pass, no list of records or of outcomes in between. With
 * `refused`, every record gets that outcome instead. */
function processBatch(b, n, refused) {
  outOutcomes.len = outEvents.len = outData.len = 0;
  let count = 0;
  for (let i = 0; i < n; i++) {
    let o = refused;
    if (o === null) {
      try {
        o = instance.process(new BatchRecord(b, i));
      } catch (e) {
        o = reject(why(e));
      }
    }
    const mo = outOutcomes.len, me = outEvents.len, md = outData.len, mc = count;
    try {
      count = packOne(o, count);
    } catch (_) {
      // Not an outcome, or an event of the wrong shape: undo what it wrote
      // and reject its record, naming what was wrong; the rest stands.
      outOutcomes.len = mo;
      outEvents.len = me;
      outData.len = md;
      count = mc;
      reason(REJECT, fault(o));
    }
  }
  return { outcomes: outOutcomes.take(), events: outEvents.take(), data: outData.take() };
}

/** An exception as a reject reason, with the plugin's line: the first
 * frame of its stack outside this SDK (a helper given the wrong type
 * throws in here). Stacks read `at f (file:line:col)` in Node and
 * `f@file:line:col` inside the component. */
const why = (e) => {
  if (!(e instanceof Error)) return String(e);
  const frames = String(e.stack ?? "")
    .split("\n")
    .map((l) => /([^\s(@]*?):(\d+):\d+\)?\s*$/.exec(l))
    .filter((m) => m !== null && !m[1].endsWith("sluice-plugin.js"));
  const at = frames.length > 0 ? ` (line ${frames[0][2]}${frames[0][1] ? " of " + frames[0][1].split("/").pop() : ""})` : "";
  return `${e.name}: ${e.message}${at}`;
};

/** The plugin instance `init` made; null until then. */
let instance = null;
const NOT_READY = reject("plugin used before init");

/** A plugin set up with `config`, its keys checked first (as `init` does). */
function configured(PluginClass, config) {
  const plugin = new PluginClass();
  const known = PluginClass.configKeys;
  if (known != null && config !== null && typeof config === "object") {
    const unknown = Object.keys(config).filter((k) => !known.includes(k)).sort();
    if (unknown.length > 0) {
      throw new Error(`unknown config key '${unknown[0]}' (this plugin reads: ${[...known].sort().join(", ") || "none"})`);
    }
  }
  plugin.setup(config);
  return plugin;
}

/**
 * Each payload (a string or a Uint8Array) through the plugin in plain
 * JavaScript, judged as the host judges it: config keys checked, then
 * `setup`; an exception in `process` rejects its record, naming the
 * plugin's line; what is not an outcome rejects its record; and every
 * outcome is checked by the host's own output rules (an empty or oversized
 * id, a body that is not one JSON object, too many events reject the
 * record with the host's reason). For a plugin's unit tests, under
 * `node --import ./sluice-native.mjs`, which stands in for the host (its
 * helpers and the judging are the host's own code). Each outcome is
 * `{ verdict, reason, events }`; an event's `body` is its text and
 * `json()` parses it (a kept event's body is its record's payload).
 *
 * `options.now` pins the clock for the run (`pinNow`): a BigInt, or RFC
 * 3339 text as a case's `now`.
 */
export function runNatively(PluginClass, config, payloads, options = {}) {
  const judge = globalThis.__sluiceNative?.judge;
  if (typeof judge !== "function") {
    throw new Error("runNatively judges with the host's code: run the test under node --import ./sluice-native.mjs");
  }
  const before = pinned;
  if (options.now !== undefined) pinNow(options.now);
  try {
    return runJudged(configured(PluginClass, config), payloads, judge);
  } finally {
    pinned = before;
  }
}

function runJudged(plugin, payloads, judge) {
  return Array.from(payloads, (p, i) => {
    const payload = bytesOf(p, "runNatively's payloads");
    // Each record is its own batch here: the clock is read afresh.
    batchNow = null;
    const record = {
      payload,
      key: undefined,
      headers: [],
      sourceTimestamp: undefined,
      timestamp: undefined,
      eventId: undefined,
      position: { source: "file", partition: "test", offset: BigInt(i) },
    };
    let o;
    try {
      o = plugin.process(record);
    } catch (e) {
      o = reject(why(e));
    }
    const problem = o !== null && typeof o === "object" && ["emit", "drop", "reject"].includes(o.tag) ? null : fault(o);
    if (problem !== null) return { verdict: "reject", reason: problem, events: [] };
    if (o.tag !== "emit") return { verdict: o.tag, reason: o.val, events: [] };
    let rule;
    try {
      rule = judge(payload, o.val.map((e) => ({
        id: e.id === undefined || e.id === null ? null : e.id,
        timestamp: e.timestamp === undefined ? null : String(nanosArg(e.timestamp, "timestamp")),
        keep: e.keep === true,
        body: e.keep ? EMPTY : typeof e.body === "string" ? encoder.encode(e.body) : e.body,
        sinks: e.sinks === undefined || e.sinks === null ? null : typeof e.sinks === "string" ? e.sinks : e.sinks.join(","),
      })));
    } catch (e) {
      // An event of the wrong shape; anything else (no sluice to ask) is
      // the test's to see.
      if (!(e instanceof TypeError || e instanceof RangeError)) throw e;
      rule = fault(o);
    }
    if (rule !== null && rule !== undefined) return { verdict: "reject", reason: rule, events: [] };
    const events = o.val.map((e) => {
      const body = e.keep ? decoder.decode(payload) : typeof e.body === "string" ? e.body : decoder.decode(e.body);
      return { id: e.id, timestamp: e.timestamp, body, json: () => JSON.parse(body) };
    });
    return { verdict: "emit", reason: undefined, events };
  });
}

/** The two exports of sluice's world for a plugin class. */
export function exportPlugin(PluginClass) {
  return {
    init(config) {
      try {
        instance = configured(PluginClass, JSON.parse(config));
      } catch (e) {
        // result<_, string>: a thrown value is the error.
        throw e instanceof Error ? e.message : String(e);
      }
    },
    process(batch) {
      batchNow = null;
      lastPayload = batchPairs = null;
      const n = Math.floor(batch.records.length / RECORD);
      let b;
      try {
        b = unpack(batch);
      } catch (e) {
        return processBatch(null, n, reject(`the SDK cannot read the batch: ${why(e)}`));
      }
      const out = processBatch(b, n, instance === null ? NOT_READY : null);
      // Nothing of this batch is kept past its call.
      lastPayload = batchPairs = null;
      return out;
    },
  };
}
