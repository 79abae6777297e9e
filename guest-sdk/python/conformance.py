"""The conformance plugin (conformance/SPEC.md) in Python."""

from sluice_plugin import Plugin, drop, emit, emit_many, event, export, keep, reject


def shown(b):
    """Bytes shown (SPEC.md): hex up to 32 bytes, else length and sum."""
    b = bytes(b)
    return b.hex() if len(b) <= 32 else f"{len(b)} bytes, sum {sum(b) % (1 << 32)}"


class Conformance(Plugin):
    def setup(self, config):
        if isinstance(config.get("refuse"), str):
            raise ValueError(config["refuse"])
        self.tag = config.get("tag", "")

    def process(self, record):
        p = bytes(record.payload)
        if p.startswith(b'{"keep"'):
            return keep(record)
        if p.startswith(b"drop:"):
            return drop(p[5:].decode("utf-8", "replace"))
        if p.startswith(b"reject:"):
            return reject(p[7:].decode("utf-8", "replace"))
        if p.startswith(b"route:"):
            names = p[6:].decode("utf-8", "replace")
            return emit({"route": names}, sinks=names.split(","))
        if p.startswith(b"split:"):
            base = record.event_id if record.event_id is not None else "none"
            return emit_many([event({"k": k}, id=f"{base}/{k}") for k in range(int(p[6:]))])
        where = str(record.position)
        ts = record.timestamp if record.timestamp is not None else record.source_timestamp
        body = {
            "tag": self.tag,
            "len": len(p),
            "sum": sum(p) % (1 << 32),
            "head": p[:8].hex(),
            "key": shown(record.key) if record.key is not None else None,
            "headers": [[k, shown(v)] for (k, v) in record.headers],
            "position": where,
        }
        return emit(body, id=record.event_id, timestamp=ts)


WitWorld = export(Conformance)
