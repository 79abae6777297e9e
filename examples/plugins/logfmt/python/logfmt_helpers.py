"""logfmt lines in, one JSON object out: the Python example again, with the
host's native splitter (`sluice_plugin.logfmt`) in place of a loop in
Python. Same cases, same answers (see the README beside it)."""

from sluice_plugin import Plugin, drop, emit, export, logfmt, reject


class Logfmt(Plugin):
    config_keys = {"id_field"}

    def setup(self, config):
        self.id_field = config.get("id_field")

    def process(self, record):
        pairs = logfmt(record.payload)
        if not pairs:
            if not bytes(record.payload).strip():
                return drop("blank line")
            return reject("no key=value pair in the line")
        value = pairs.get(self.id_field) if self.id_field else None
        # An empty value is no id (the host refuses empty ids).
        return emit(pairs, id=value if isinstance(value, str) and value else None)


WitWorld = export(Logfmt)
