"""logfmt lines in, one JSON object out (see the README beside it)."""

from sluice_plugin import Plugin, drop, emit, export, reject


def parse(line):
    out = {}
    i, n = 0, len(line)
    while i < n:
        while i < n and line[i] == " ":
            i += 1
        start = i
        while i < n and line[i] != "=" and line[i] != " ":
            i += 1
        key = line[start:i]
        if i < n and line[i] == "=":
            i += 1
            value = []
            if i < n and line[i] == '"':
                i += 1
                while i < n and line[i] != '"':
                    if line[i] == "\\" and i + 1 < n and line[i + 1] in '"\\':
                        i += 1
                    value.append(line[i])
                    i += 1
                i += 1
            else:
                while i < n and line[i] != " ":
                    value.append(line[i])
                    i += 1
            if key:
                out[key] = "".join(value)
        elif key:
            out[key] = True
    return out


class Logfmt(Plugin):
    def setup(self, config):
        unknown = set(config) - {"id_field"}
        if unknown:
            raise ValueError(f"unknown config key {sorted(unknown)[0]!r}")
        self.id_field = config.get("id_field")

    def process(self, record):
        line = bytes(record.payload).decode("utf-8", "replace").rstrip("\r\n")
        if not line.strip():
            return drop("blank line")
        pairs = parse(line)
        if not pairs:
            return reject("no key=value pair in the line")
        value = pairs.get(self.id_field) if self.id_field else None
        # An empty value is no id (the host refuses empty ids).
        return emit(pairs, id=value if isinstance(value, str) and value else None)


WitWorld = export(Logfmt)
