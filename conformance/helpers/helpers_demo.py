"""The helpers plugin of conformance/helpers/SPEC.md in Python: every
native helper (`sluice:plugin/helpers`) through the SDK's functions, and
the attacks the host must bound."""

from sluice_plugin import (
    Patterns,
    Plugin,
    TimeFormat,
    emit,
    export,
    format_rfc3339,
    json_get,
    json_object_check,
    logfmt,
    reject,
)


class HelpersDemo(Plugin):
    config_keys = {"zone"}

    def setup(self, config):
        rule = {"format": "%Y-%m-%d %H:%M:%S"}
        if "zone" in config:
            rule["zone"] = config["zone"]
        self.time = TimeFormat(rule)
        self.patterns = Patterns(["^%{INT:pid} %{LOGLEVEL:level} %{GREEDYDATA:msg}$", "^%{GREEDYDATA:other}$"])

    def process(self, record):
        pairs = logfmt(record.payload)
        attack = pairs.get("attack")
        if attack == "pattern":
            matched = Patterns(["^(a+)+$"]).match("a" * 100_000 + "!")
            return emit({"matched": matched is not None})
        if attack == "path":
            return reject(str(_error(lambda: json_get("{}", "a." * 10_000 + "a"))))
        if attack == "payload":
            # One buffer, written in place: the plugin's memory holds it
            # and the copy the call lowers, no more.
            size = int(pairs.get("mib", "64")) << 20
            payload = bytearray(b"x") * (size + 8)
            payload[:6] = b'{"a":"'
            payload[-2:] = b'"}'
            got = json_get(payload, "b")
            return emit({"bytes": len(payload), "found": got[0] is not None})
        if attack == "flood":
            kept = []
            for _ in range(1_000):
                error = _error(lambda: kept.append(TimeFormat("rfc3339")))
                if error:
                    return reject(f"after {len(kept)}: {error}")
            return emit({"kept": len(kept)})
        try:
            ns = self.time.parse(pairs.get("ts", ""))
            got = json_get(pairs.get("json", "{}"), "a.b", "tags.1")
        except ValueError as e:
            return reject(str(e))
        m = self.patterns.match(pairs.get("line", ""))
        body = {
            "pairs": pairs,
            "rfc3339": format_rfc3339(ns),
            "pattern": None if m is None else m[0],
            "captures": None if m is None else m[1],
            "got": got,
            "check": json_object_check(pairs.get("check", "{}")),
        }
        return emit(body, timestamp=ns)


def _error(call):
    try:
        call()
    except ValueError as e:
        return e
    return None


WitWorld = export(HelpersDemo)
