"""The least a Python plugin can do: one fixed event per record. Its cost
per record is the SDK's and the boundary's (benches/plugin_languages)."""

from sluice_plugin import Plugin, emit_many, event, export

_EVENT = [event(b"{}")]


class Noop(Plugin):
    def process(self, record):
        return emit_many(_EVENT)


WitWorld = export(Noop)
