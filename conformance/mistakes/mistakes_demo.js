// Every helper of the JavaScript SDK given what an author is likely to
// pass by mistake (conformance/mistakes/README.md). Each record's payload
// names one mistake; the plugin makes it, and what it returns or throws is
// the outcome: a wrong type throws the language's TypeError (its record is
// rejected, naming this file's line), a natural type is taken. None may
// trap the instance.
import {
  Patterns,
  Plugin,
  TimeFormat,
  emit,
  exportPlugin,
  formatRfc3339,
  framed,
  info,
  jsonGet,
  jsonObjectCheck,
  logfmt,
  nowNanos,
  schema,
  schemaReferences,
  text,
} from "./sluice-plugin.js";

class Mistakes extends Plugin {
  static configKeys = [];

  setup() {
    this.day = new TimeFormat("%Y-%m-%d");
    this.pid = new Patterns(["^%{INT:pid}"]);
  }

  process(record) {
    const name = text(record.payload);
    const mistakes = {
      // Wrong types: a TypeError (or RangeError) naming the helper.
      "time-format-int": () => new TimeFormat(5),
      "time-parse-null": () => this.day.parse(null),
      "time-parse-object": () => this.day.parse({}),
      "time-parse-array": () => this.day.parse(["2017-05-16"]),
      "patterns-int": () => new Patterns(5),
      "patterns-item-int": () => new Patterns([1]),
      "match-null": () => this.pid.match(null),
      "match-object": () => this.pid.match({}),
      "logfmt-int": () => logfmt(5),
      "logfmt-null": () => logfmt(null),
      "json-get-int": () => jsonGet(5, "a"),
      "json-get-path-int": () => jsonGet(new TextEncoder().encode("{}"), 5),
      "json-check-null": () => jsonObjectCheck(null),
      "rfc3339-text": () => formatRfc3339("soon"),
      "rfc3339-huge": () => formatRfc3339(2n ** 70n),
      "rfc3339-fraction": () => formatRfc3339(1.5),
      "rfc3339-null": () => formatRfc3339(null),
      "schema-null": () => schema(null),
      "schema-string": () => schema("7"),
      "schema-fraction": () => schema(1.5),
      "schema-negative": () => schema(-1),
      "framed-null": () => framed(null),
      "schema-references-string": () => schemaReferences("7"),
      // Natural types: taken.
      "ok-time-parse-bytes": () => this.day.parse(new TextEncoder().encode("2017-05-16")),
      "ok-time-parse-payload": () => this.day.parse(record.payload.subarray(record.payload.length - 10)),
      "ok-match-payload": () => this.pid.match(record.payload),
      "ok-json-get-array": () => jsonGet(new TextEncoder().encode('{"a":1}'), ["a"]),
      "ok-rfc3339-number": () => formatRfc3339(0),
      "ok-info-number": () => info(5),
      "ok-now": () => nowNanos() > 0n,
      "ok-framed-payload": () => framed(record.payload),
      "ok-framed-bytes": () => framed(new Uint8Array([0, 0, 0, 0, 7, 120])).id,
    };
    if (name === "emit-fraction-timestamp") return emit({ a: 1 }, undefined, 1.5);
    if (name === "ok-emit-number-id") return emit({ a: 1 }, 7);
    const made = mistakes[name.split(" ")[0]]();
    return emit({ mistake: name, result: String(made) });
  }
}

export const { init, process } = exportPlugin(Mistakes);
