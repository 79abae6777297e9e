// logfmt lines in, one JSON object out (see the README beside it).
import { Plugin, drop, emit, exportPlugin, reject, text } from "./sluice-plugin.js";

export function parse(line) {
  const out = {};
  let i = 0;
  const n = line.length;
  while (i < n) {
    while (i < n && line[i] === " ") i++;
    const start = i;
    while (i < n && line[i] !== "=" && line[i] !== " ") i++;
    const key = line.slice(start, i);
    if (i < n && line[i] === "=") {
      i++;
      let value = "";
      if (i < n && line[i] === '"') {
        i++;
        while (i < n && line[i] !== '"') {
          if (line[i] === "\\" && i + 1 < n && (line[i + 1] === '"' || line[i + 1] === "\\")) i++;
          value += line[i];
          i++;
        }
        i++;
      } else {
        while (i < n && line[i] !== " ") {
          value += line[i];
          i++;
        }
      }
      if (key) out[key] = value;
    } else if (key) {
      out[key] = true;
    }
  }
  return out;
}

class Logfmt extends Plugin {
  setup(config) {
    for (const k of Object.keys(config)) {
      if (k !== "id_field") throw new Error(`unknown config key '${k}'`);
    }
    this.idField = config.id_field;
  }

  process(record) {
    const line = text(record.payload).replace(/[\r\n]+$/, "");
    if (line.trim() === "") return drop("blank line");
    const pairs = parse(line);
    if (Object.keys(pairs).length === 0) return reject("no key=value pair in the line");
    // An empty value is no id (the host refuses empty ids).
    const value = this.idField === undefined ? undefined : pairs[this.idField];
    const id = typeof value === "string" && value !== "" ? value : undefined;
    return emit(pairs, id);
  }
}

export const { init, process } = exportPlugin(Logfmt);
