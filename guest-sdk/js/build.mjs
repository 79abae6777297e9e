// Build a sluice plugin component from a JavaScript module with
// componentize-js (npm), against sluice's WIT world:
//
//     node build.mjs plugin.js plugin.wasm [wit-dir]
//
// `COMPONENTIZE_JS` may name the componentize-js package folder (a shared
// install); otherwise it is resolved from the nearest node_modules. No
// wasi:http (sluice links none, and a plugin has no network).
//
// `WORLD=classifier` builds a classifier plugin (`sluice-classifier.js`,
// `wit/classifier.wit`) instead of a parse plugin.
//
// `WEVAL` naming a weval program turns on componentize-js's ahead-of-time
// mode (the JavaScript is partially evaluated into wasm at build time);
// benches/README.md has what it changes per record.
import { writeFile } from "node:fs/promises";
import { pathToFileURL } from "node:url";
import { join } from "node:path";

const [source, output, wit = "wit"] = process.argv.slice(2);
if (!source || !output) {
  console.error("usage: node build.mjs <plugin.js> <out.wasm> [wit-dir]");
  process.exit(2);
}
const from = process.env.COMPONENTIZE_JS;
const { componentize } = from
  ? await import(pathToFileURL(join(from, "src", "componentize.js")).href)
  : await import("@bytecodealliance/componentize-js");
const aot = process.env.WEVAL ? { enableAot: true, wevalBin: process.env.WEVAL } : {};
const { component } = await componentize({
  sourcePath: source,
  witPath: wit,
  worldName: process.env.WORLD || "plugin",
  disableFeatures: ["http", "fetch-event"],
  ...aot,
});
await writeFile(output, component);
console.log(`built ${output} (${component.length} bytes)`);
