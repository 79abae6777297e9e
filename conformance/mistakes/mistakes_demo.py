"""Every helper of the Python SDK given what an author is likely to pass
by mistake (conformance/mistakes/README.md). Each record's payload names
one mistake; the plugin makes it, and what it returns or raises is the
outcome: a wrong type raises the language's TypeError (its record is
rejected, naming this file's line), a natural type is taken. None may
trap the instance."""

from sluice_plugin import (
    Patterns,
    Plugin,
    TimeFormat,
    emit,
    export,
    format_rfc3339,
    framed,
    info,
    json_get,
    json_object_check,
    logfmt,
    now_nanos,
    schema,
    schema_references,
)


class Mistakes(Plugin):
    config_keys = set()

    def setup(self, config):
        self.day = TimeFormat("%Y-%m-%d")
        self.pid = Patterns(["^%{INT:pid}"])

    def process(self, record):
        name = bytes(record.payload).decode()
        mistakes = {
            # Wrong types: a TypeError (or ValueError) naming the helper.
            "time-format-int": lambda: TimeFormat(5),
            "time-parse-none": lambda: self.day.parse(None),
            "time-parse-float": lambda: self.day.parse(3.5),
            "time-parse-list": lambda: self.day.parse(["2017-05-16"]),
            "patterns-int": lambda: Patterns(5),
            "patterns-item-int": lambda: Patterns([1]),
            "match-none": lambda: self.pid.match(None),
            "match-dict": lambda: self.pid.match({}),
            "logfmt-int": lambda: logfmt(5),
            "logfmt-none": lambda: logfmt(None),
            "json-get-int": lambda: json_get(5, "a"),
            "json-get-path-int": lambda: json_get(b"{}", 5),
            "json-check-none": lambda: json_object_check(None),
            "rfc3339-text": lambda: format_rfc3339("soon"),
            "rfc3339-huge": lambda: format_rfc3339(2**70),
            "rfc3339-none": lambda: format_rfc3339(None),
            "emit-int-body": lambda: emit(5),
            "schema-none": lambda: schema(None),
            "schema-text": lambda: schema("7"),
            "schema-negative": lambda: schema(-1),
            # No [schema_registry]: the host's reason, as a ValueError.
            "schema-unfetched": lambda: schema(7),
            "framed-none": lambda: framed(None),
            "schema-references-text": lambda: schema_references("7"),
            # Natural types: taken.
            "ok-time-parse-bytes": lambda: self.day.parse(b"2017-05-16"),
            "ok-time-parse-payload": lambda: self.day.parse(record.payload[-10:]),
            "ok-match-payload": lambda: self.pid.match(record.payload),
            "ok-json-get-list": lambda: json_get(b'{"a":1}', ["a"]),
            "ok-rfc3339-digits": lambda: format_rfc3339("0"),
            "ok-info-int": lambda: info(5),
            "ok-now": lambda: now_nanos() > 0,
            "ok-framed-payload": lambda: framed(record.payload),
            "ok-framed-bytes": lambda: framed(b"\x00\x00\x00\x00\x07x"),
        }
        if name == "emit-float-timestamp":
            return emit({"a": 1}, timestamp=1.5)
        if name == "ok-emit-int-id":
            return emit({"a": 1}, id=7)
        made = mistakes[name.split(" ")[0]]()
        return emit({"mistake": name, "result": repr(made)})


WitWorld = export(Mistakes)
