// Write sluice classifier plugins in JavaScript: read how a backend
// answered one request of the HTTP sink (`wit/classifier.wit`), for a
// backend no built-in profile covers.
//
// A classifier extends `Classifier` and overrides
// `classify(request, response)`, returning `each([...])`, `all(fate)`,
// `split(reason)` or `badRow(row, reason)`, where a fate is `accepted()`,
// `duplicate()`, `retry(reason)`, `reject(reason)` or `systemic(reason)`.
// The module ends with
//
//     export const { init, classify } = exportClassifier(MyClassifier);
//
// and is built against the classifier world:
//
//     WORLD=classifier node build.mjs my-classifier.js my-classifier.wasm wit
//
// An exception thrown by `classify` answers systemic, with the exception
// as the reason: the records wait behind the breaker, none is quarantined
// for the classifier's fault. The host's fixed rules apply after the
// reply (a 404 stays systemic whatever the classifier says).
//
// `request.length`, `request.id(i)`, `request.timestamp(i)` (BigInt ns or
// undefined), `request.span(i)` ([start, length] in the request body),
// `request.recordAt(pos)`; `response.status`, `response.headers` (an
// object, names in lower case, only those the config lists),
// `response.body` (a Uint8Array), `response.truncated`, `response.json()`,
// `response.text()`, `response.excerpt()`.

import { log } from "sluice:plugin/log@0.2.0";

const RECORD = 32;
const decoder = new TextDecoder();

export class Request {
  constructor(records, ids, bodyBytes, attempt) {
    this.records = records;
    this.ids = ids;
    this.bodyBytes = bodyBytes;
    this.attempt = attempt;
    this.view = new DataView(records.buffer, records.byteOffset, records.byteLength);
  }
  get length() {
    return Math.floor(this.records.length / RECORD);
  }
  id(i) {
    const at = i * RECORD;
    const start = this.view.getUint32(at, true);
    const len = this.view.getUint32(at + 4, true);
    return decoder.decode(this.ids.subarray(start, start + len));
  }
  timestamp(i) {
    const at = i * RECORD;
    return this.view.getUint32(at + 24, true) & 1 ? this.view.getBigInt64(at + 16, true) : undefined;
  }
  span(i) {
    const at = i * RECORD;
    return [this.view.getUint32(at + 8, true), this.view.getUint32(at + 12, true)];
  }
  recordAt(pos) {
    for (let i = 0; i < this.length; i++) {
      const [start, len] = this.span(i);
      if (pos >= start && pos < start + len) return i;
    }
    return undefined;
  }
}

export class Response {
  constructor(status, headers, body, truncated) {
    this.status = status;
    this.headers = Object.fromEntries(headers);
    this.body = body;
    this.truncated = truncated;
  }
  text() {
    return decoder.decode(this.body);
  }
  /** The body as JSON; throws naming why not. */
  json() {
    if (this.truncated) throw new Error(`the body was cut at ${this.body.length} bytes`);
    try {
      return JSON.parse(this.text());
    } catch (e) {
      throw new Error(`the body is not the JSON expected: ${e.message}`);
    }
  }
  excerpt() {
    const text = decoder.decode(this.body.subarray(0, 400)).split(/\s+/).filter(Boolean).join(" ");
    return text ? `HTTP ${this.status}: ${text}` : `HTTP ${this.status}`;
  }
}

export const accepted = () => ({ tag: "accepted" });
export const duplicate = () => ({ tag: "duplicate" });
export const retry = (reason) => ({ tag: "retry", val: String(reason) });
export const reject = (reason) => ({ tag: "reject", val: String(reason) });
export const systemic = (reason) => ({ tag: "systemic", val: String(reason) });
export const each = (fates) => ({ tag: "each", val: fates });
export const all = (fate) => ({ tag: "all", val: fate });
export const split = (reason) => ({ tag: "split", val: String(reason) });
export const badRow = (row, reason) => ({ tag: "bad-row", val: { row, reason: String(reason) } });

export function info(message) {
  log("info", String(message));
}

export class Classifier {
  /** Throw to refuse the config (name the key). */
  setup(config) {
    const keys = Object.keys(config ?? {});
    if (keys.length > 0) throw new Error(`unknown config key '${keys.sort()[0]}'`);
  }
  classify(_request, _response) {
    throw new Error("classify is not implemented");
  }
}

const why = (e) => (e instanceof Error ? `${e.name}: ${e.message}` : String(e));
let instance = null;

/** The two exports of the classifier world for a classifier class. */
export function exportClassifier(ClassifierClass) {
  return {
    init(config) {
      try {
        const c = new ClassifierClass();
        c.setup(JSON.parse(config || "{}"));
        instance = c;
      } catch (e) {
        throw e instanceof Error ? e.message : String(e);
      }
    },
    classify(request, response) {
      if (instance === null) return all(systemic("classifier used before init"));
      const req = new Request(request.records, request.ids, request.bodyBytes, request.attempt);
      const resp = new Response(response.status, response.headers, response.body, response.truncated);
      try {
        return instance.classify(req, resp);
      } catch (e) {
        return all(systemic(`classifier failed: ${why(e)}`));
      }
    },
  };
}
