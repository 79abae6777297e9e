// The least a JavaScript plugin can do: one fixed event per record. Its
// cost per record is the SDK's and the boundary's (benches/plugin_languages).
import { Plugin, event, emitMany, exportPlugin } from "./sluice-plugin.js";

const events = [event({})];

class Noop extends Plugin {
  process(_record) {
    return emitMany(events);
  }
}

export const { init, process } = exportPlugin(Noop);
