"""A Python plugin that returns what is not an outcome for some records
(tests/tests/sdk_languages.rs): the SDK must reject those records alone,
naming what was wrong, and pack the rest of the batch."""

from sluice_plugin import Event, Outcome, Plugin, emit, export


class BadReturns(Plugin):
    def process(self, record):
        p = bytes(record.payload)
        if p == b"none":
            return None
        if p == b"str-body":
            return Outcome(0, [Event("not bytes")])
        if p == b"float-time":
            return Outcome(0, [Event(b"{}", timestamp=1.5)])
        if p == b"huge-time":
            return Outcome(0, [Event(b"{}", timestamp=1 << 70)])
        if p == b"raise":
            raise ValueError("asked to")
        return emit({"line": p.decode()})


WitWorld = export(BadReturns)
