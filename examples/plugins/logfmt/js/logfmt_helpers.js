// logfmt lines in, one JSON object out: the JavaScript example again, with
// the host's native splitter (`logfmt` of the SDK) in place of a loop in
// JavaScript. Same cases, same answers (see the README beside it).

import { Plugin, drop, emit, exportPlugin, logfmt, reject } from "./sluice-plugin.js";

class Logfmt extends Plugin {
  static configKeys = ["id_field"];

  setup(config) {
    this.idField = config.id_field;
  }

  process(record) {
    const pairs = logfmt(record.payload);
    const keys = Object.keys(pairs);
    if (keys.length === 0) {
      const blank = record.payload.every((b) => b === 32 || b === 9 || b === 10 || b === 13);
      return blank ? drop("blank line") : reject("no key=value pair in the line");
    }
    const value = this.idField ? pairs[this.idField] : undefined;
    // An empty value is no id (the host refuses empty ids).
    return emit(pairs, typeof value === "string" && value ? value : undefined);
  }
}

export const { init, process } = exportPlugin(Logfmt);
