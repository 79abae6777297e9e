"""Write sluice plugins in Python: one class, one method.

A plugin subclasses `Plugin` and overrides `process(record)`, returning
`emit(...)`, `drop(reason)` or `reject(reason)`; `setup(config)` may refuse
its config by raising `ValueError`. The module that defines the plugin ends
with

    WitWorld = export(MyPlugin)

and componentize-py builds it against sluice's WIT world:

    componentize-py -d wit -w plugin componentize my_plugin -o my_plugin.wasm

An exception raised by `process` rejects that record only, with the
exception as the reason; the rest of the batch goes on.

A plugin that lists its config keys (`config_keys = {"field", ...}` on the
class) has any other key refused before `setup`, naming it: a misspelt key
stops the start instead of being ignored.

The module imports in plain Python too, without the component's bindings:
a plugin's unit tests call `run_natively(MyPlugin, config, payloads)` (or
`MyPlugin().process(Record(b"..."))`) and look at each outcome's
`verdict`, `events` and `reason`; `now_nanos()` is then the system clock
and `info`/`warn` print to stderr.

The host's native helpers (`sluice:plugin/helpers`) are ordinary
functions here: `logfmt(line)`, `json_get(payload, *paths)`,
`json_object_check(payload)`, `format_rfc3339(nanos)`, and
`TimeFormat(spec).parse(text)` and `Patterns([...]).match(line)`, compiled
once in `setup`. They run natively in the host, so a parser built on them
costs the interpreter one call per record instead of a loop. In a unit
test, `TimeFormat` and `Patterns` ask the host's own code through
`sluice plugin helpers` (`sluice` on the PATH, or $SLUICE): a format, a
zone or a pattern answers there exactly as in the pipeline.

This SDK speaks `sluice:plugin@0.2.0`: a batch arrives as a few byte
buffers (the layout is in `wit/plugin.wit`). Each record handed to
`process` reads its fields from them when asked (a plugin pays only for the
fields it reads), and the outcomes are packed back the same way. A plugin
never sees the buffers. `Record(...)` builds a plain record, for tests.
"""

import json
import struct
import sys
import time
import traceback
from typing import Any, Dict, Iterable, List, Optional, Union

try:
    from componentize_py_types import Err
    from wit_world import WitWorld
    from wit_world.imports import clock, helpers, log, types

    NATIVE = False
except ImportError:
    # Plain Python, outside the component: a plugin's unit test. Only the
    # host's imports are missing; everything a plugin calls works.
    NATIVE = True
    WitWorld = object
    clock = helpers = log = types = None

    class Err(Exception):
        pass

# The 0.2 layout (wit/plugin.wit): little-endian, fixed-width descriptors.
_RECORD = struct.Struct("<IIIIIIIIqqqII")  # 64 bytes
_HEADER = struct.Struct("<IIII")  # 16 bytes
_OUTCOME = struct.Struct("<III")  # 12 bytes
_EVENT = struct.Struct("<IIIIqII")  # 32 bytes
_KEY, _SOURCE_TS, _EVENT_ID, _TS = 1, 2, 4, 8
_EMIT, _DROP, _REJECT = 0, 1, 2
_EV_ID, _EV_TS, _EV_KEEP, _EV_SINKS = 1, 2, 4, 8


class Position:
    """Where a record sits: a partition of a kind of source, and an offset.
    `str(position)` is `source:partition@offset`, the host's default id."""

    __slots__ = ("source", "partition", "offset")

    def __init__(self, source: str, partition: str, offset: int):
        self.source = source
        self.partition = partition
        self.offset = offset

    def __str__(self) -> str:
        return f"{self.source}:{self.partition}@{self.offset}"

    __repr__ = __str__


class Record:
    """One record in. `payload` and `key` are bytes; `headers` a list of
    (name, bytes); timestamps are nanoseconds since the Unix epoch or None."""

    __slots__ = ("payload", "key", "headers", "source_timestamp", "position", "event_id", "timestamp")

    def __init__(self, payload=b"", key=None, headers=(), source_timestamp=None, position=None, event_id=None, timestamp=None):
        self.payload = payload
        self.key = key
        self.headers = list(headers)
        self.source_timestamp = source_timestamp
        self.position = position if position is not None else Position("file", "<test>#0", 0)
        self.event_id = event_id
        self.timestamp = timestamp


class Event:
    __slots__ = ("id", "timestamp", "body", "sinks")

    def __init__(self, body: bytes, id: Optional[str] = None, timestamp: Optional[int] = None, sinks=None):
        self.id = id
        self.timestamp = timestamp
        self.body = body
        self.sinks = sinks

    def json(self):
        """The body parsed, for tests (a kept body is its record's payload,
        which only the host holds: None)."""
        return None if self.body is _KEPT else json.loads(self.body)

    def __repr__(self) -> str:
        routed = "" if self.sinks is None else f", sinks={list(self.sinks)!r}"
        return f"event(id={self.id!r}, timestamp={self.timestamp!r}, body={bytes(self.body)!r}{routed})"


class Outcome:
    """What became of one record: made by `emit`, `emit_many`, `drop`, `reject`."""

    __slots__ = ("kind", "value")

    def __init__(self, kind: int, value):
        self.kind = kind
        self.value = value

    @property
    def verdict(self) -> str:
        """`"emit"`, `"drop"` or `"reject"`."""
        return ("emit", "drop", "reject")[self.kind]

    @property
    def events(self) -> List["Event"]:
        return list(self.value) if self.kind == _EMIT else []

    @property
    def reason(self) -> Optional[str]:
        return None if self.kind == _EMIT else self.value

    def __repr__(self) -> str:
        return f"{self.verdict}({self.value!r})"


def event(
    body: Union[Dict[str, Any], bytes, str],
    id: Optional[str] = None,
    timestamp: Optional[int] = None,
    sinks: Optional[List[str]] = None,
) -> Event:
    """One event. `body` is a dict (serialized to JSON) or JSON text/bytes;
    `timestamp` is nanoseconds since the Unix epoch. `sinks`, a list of
    sink names (`[[sinks]]`), sends it there and only there, over the
    config's routes; a name the pipeline has no sink for quarantines the
    record."""
    if type(body) is _HostJson and body._text is not None:
        # The host's JSON text of it, unchanged since: not serialized again.
        raw = body._text.encode()
    elif isinstance(body, dict):
        raw = json.dumps(body, separators=(",", ":"), ensure_ascii=False).encode()
    elif isinstance(body, str):
        raw = body.encode()
    elif isinstance(body, (bytes, bytearray, memoryview)):
        raw = bytes(body)
    else:
        # bytes([1, 2]) would make two bytes of a list: say what it was.
        raise TypeError(
            f"an event body is a dict (a JSON object), or JSON text as str or bytes, not {_a(type(body).__name__)}"
        )
    if isinstance(id, int) and not isinstance(id, bool):
        id = str(id)  # a number is a natural id: its digits
    return Event(raw, id, timestamp, sinks)


def emit(
    body: Union[Dict[str, Any], bytes, str],
    id: Optional[str] = None,
    timestamp: Optional[int] = None,
    sinks: Optional[List[str]] = None,
) -> Outcome:
    """One event from this record (`sinks`: as `event`'s)."""
    return Outcome(_EMIT, [event(body, id, timestamp, sinks)])


class _Kept(bytes):
    """The body of an event made by `keep`: its record's payload, which
    never crosses back to the host."""


_KEPT = _Kept()


def keep(
    record: "Record", id: Optional[str] = None, timestamp: Optional[int] = None, sinks: Optional[List[str]] = None
) -> Outcome:
    """The record goes on unchanged: one event whose body is its payload,
    with the id and timestamp an earlier stage set unless given here. Its
    bytes never cross back to the host (the contract's *keep* flag): the
    fastest outcome there is, for filters, validators and id or timestamp
    setters. `sinks`: as `event`'s."""
    return Outcome(_EMIT, [Event(_KEPT, id, timestamp, sinks)])


def emit_many(events: List[Event]) -> Outcome:
    """Several events from one record (a split), or none."""
    return Outcome(_EMIT, list(events))


def drop(reason: str) -> Outcome:
    """Filtered on purpose: counted per plugin and reason, never delivered."""
    return Outcome(_DROP, str(reason))


def reject(reason: str) -> Outcome:
    """Never valid: the record goes to the quarantine with this reason."""
    return Outcome(_REJECT, str(reason))


# A unit test's clock (`pin_now`), natively only: in the host, a case's
# `now` pins the clock the host hands out.
_pinned_now: Optional[int] = None


def pin_now(nanos: Optional[Union[int, str]]) -> None:
    """Natively, make `now_nanos()` and the clock `TimeFormat.parse` reads
    (a yearless format's year) answer `nanos`: an int, or RFC 3339 text
    (`"2026-12-01T12:00:00Z"`), as a case's `now`; None for the system
    clock again. `run_natively(..., now=...)` does the same for one run.
    Inside the host, a case's `now` pins the clock instead."""
    global _pinned_now
    if nanos is None or isinstance(nanos, int) and not isinstance(nanos, bool):
        _pinned_now = nanos if nanos is None else _nanos(nanos, "pin_now")
    elif isinstance(nanos, str):
        _pinned_now = TimeFormat("rfc3339").parse(nanos)
    else:
        raise TypeError(f"pin_now takes nanoseconds (int) or RFC 3339 text, not {_a(type(nanos).__name__)}")


def now_nanos() -> int:
    """The host's clock (the plugin has no other); natively, the system's,
    or what `pin_now` pinned."""
    if NATIVE:
        return time.time_ns() if _pinned_now is None else _pinned_now
    return clock.now()


def info(message: str) -> None:
    """A line in the host's log at level info: shown when the host logs at
    info (`SLUICE_LOG=info`; its default shows warnings only)."""
    message = message if isinstance(message, str) else str(message)
    if NATIVE:
        print(f"info: {message}", file=sys.stderr)
    else:
        log.log(types.Level.INFO, message)


def warn(message: str) -> None:
    """A line in the host's log at level warn: shown by default."""
    message = message if isinstance(message, str) else str(message)
    if NATIVE:
        print(f"warn: {message}", file=sys.stderr)
    else:
        log.log(types.Level.WARN, message)


# --- Native helpers (sluice:plugin/helpers) ------------------------------
#
# Work a parser repeats per record, run by the host natively: the
# interpreter pays one call instead of a loop. The same code serves sluice's
# own plugins, so a format, a zone or a pattern means the same here. Natively
# (a unit test outside the component) `logfmt`, `json_get` and
# `json_object_check` run in Python with the same answers, and `TimeFormat`
# and `Patterns` ask the host's own code: `sluice plugin helpers`, started
# once per test run from $SLUICE or the PATH.


# What each helper takes, checked here and not by the bindings: a value the
# bindings cannot convert traps the instance, record after record, where a
# TypeError rejects the one record and names the plugin's line.

_BYTES_LIKE = (bytes, bytearray, memoryview)
_I64 = (-(1 << 63), (1 << 63) - 1)


def _text(value, what: str) -> str:
    """A str, or bytes (a record's payload) read as UTF-8; a number as its
    digits. Anything else is the author's mistake: TypeError."""
    if isinstance(value, str):
        return value
    if isinstance(value, _BYTES_LIKE):
        return bytes(value).decode("utf-8", "replace")
    if isinstance(value, int) and not isinstance(value, bool):
        return str(value)
    raise TypeError(f"{what} takes str or bytes, not {_a(type(value).__name__)}")


def _bytes(value, what: str) -> bytes:
    """bytes as they are, a str as UTF-8. Not an int: bytes(5) would be
    five zero bytes."""
    if isinstance(value, _BYTES_LIKE):
        return bytes(value)
    if isinstance(value, str):
        return value.encode()
    raise TypeError(f"{what} takes bytes or str, not {_a(type(value).__name__)}")


def _nanos(value, what: str) -> int:
    """Whole nanoseconds in the 64-bit range: an int, or its digits."""
    if isinstance(value, str):
        try:
            value = int(value)
        except ValueError:
            raise ValueError(f"{what} takes whole nanoseconds, not {value!r}") from None
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if not isinstance(value, int) or isinstance(value, bool):
        raise TypeError(f"{what} takes an int (nanoseconds since the epoch), not {_a(type(value).__name__)}")
    if not _I64[0] <= value <= _I64[1]:
        raise ValueError(f"{what}: {value} is out of the 64-bit range of nanoseconds")
    return value


def _texts(values, what: str) -> List[str]:
    """A list of str; a lone str is one item, not its letters."""
    if isinstance(values, (str, *_BYTES_LIKE)):
        values = [values]
    try:
        items = list(values)
    except TypeError:
        raise TypeError(f"{what} takes a list of str, not {_a(type(values).__name__)}") from None
    for i, v in enumerate(items):
        if not isinstance(v, (str, *_BYTES_LIKE)):
            raise TypeError(f"{what}: item {i} is {_a(type(v).__name__)}, not a str")
    return [_text(v, what) for v in items]


class _HostJson(dict):
    """A dict read from JSON text a helper returned (`logfmt`): emitted
    unchanged, its body is that text, not a second serialization (about a
    sixth of such a plugin's time per record). Any change forgets the
    text; the values are strings and True, which cannot change in place."""

    __slots__ = ("_text",)

    def __setitem__(self, key, value):
        self._text = None
        dict.__setitem__(self, key, value)

    def __delitem__(self, key):
        self._text = None
        dict.__delitem__(self, key)

    def __ior__(self, other):
        self._text = None
        return dict.__ior__(self, other)

    def pop(self, *args):
        self._text = None
        return dict.pop(self, *args)

    def popitem(self):
        self._text = None
        return dict.popitem(self)

    def clear(self):
        self._text = None
        dict.clear(self)

    def update(self, *args, **kwargs):
        self._text = None
        dict.update(self, *args, **kwargs)

    def setdefault(self, key, default=None):
        self._text = None
        return dict.setdefault(self, key, default)


# The payload a record last handed out, with its batch and index: `logfmt`
# of exactly that object is answered from the batch's `logfmt-batch`.
_last_payload = None

# The host's clock, read once per batch (and only when a time is parsed):
# a yearless format needs it, and a host call per record would cost more
# than the parse.
_batch_now: Optional[int] = None


def _now_of_batch() -> int:
    global _batch_now
    if _batch_now is None:
        _batch_now = clock.now()
    return _batch_now


def _host_error(e: Exception) -> ValueError:
    return ValueError(getattr(e, "value", None) or str(e))


class TimeFormat:
    """A timestamp format compiled once (in `setup`), parsed per record.

    `spec` is a format name or pattern (`"rfc3339"`, `"epoch_ms"`,
    `"%Y-%m-%d %H:%M:%S"`: docs/src/plugins.md, "Timestamps"), or a dict of it
    with its rule: `{"format": "%d/%b/%Y:%H:%M:%S %z"}`,
    `{"format": "%Y-%m-%d %H:%M:%S", "zone": "Europe/Berlin"}`. A spec
    the host refuses raises `ValueError` naming what is wrong."""

    def __init__(self, spec: Union[str, Dict[str, Any]]):
        if isinstance(spec, dict):
            text = json.dumps(spec)
        elif isinstance(spec, (str, *_BYTES_LIKE)):
            text = _text(spec, "TimeFormat")
        else:
            raise TypeError(f"TimeFormat takes a format (str) or a dict of it with its rule, not {_a(type(spec).__name__)}")
        if NATIVE:
            _native_call({"call": "time-compile", "spec": text})
            self._spec = text
            return
        try:
            self._format = helpers.TimeFormat.compile(text)
        except Err as e:
            raise _host_error(e) from None

    def parse(self, text: Union[str, bytes, int]) -> int:
        """`text` (str, or bytes such as a record's payload, read as UTF-8;
        an int as its digits, for the epoch formats) as nanoseconds since
        the epoch, or `ValueError` naming the input, the format and why
        (raised from `process`, it rejects the record with that reason)."""
        text = _text(text, "TimeFormat.parse")
        if NATIVE:
            now = str(now_nanos())
            return int(_native_call({"call": "time-parse", "spec": self._spec, "text": text, "now": now}))
        try:
            return self._format.parse(text, _now_of_batch())
        except Err as e:
            raise _host_error(e) from None


class Patterns:
    """`%{SHORTCUT:name}` patterns (the pattern plugin's engine and
    shortcuts), compiled once in `setup` and tried in order per record.
    `match(line)` answers `(index, {name: text})` of the first pattern that
    matches, or None; `line` is text, or bytes (a record's payload) read as
    UTF-8. A pattern the host refuses raises `ValueError`."""

    def __init__(self, patterns: List[str]):
        patterns = _texts(patterns, "Patterns")
        if NATIVE:
            self._patterns = patterns
            _native_call({"call": "patterns-compile", "patterns": self._patterns})
            return
        try:
            self._set = helpers.Patterns.compile(patterns)
        except Err as e:
            raise _host_error(e) from None

    def match(self, line: Union[bytes, str]):
        line = _text(line, "Patterns.match")
        if NATIVE:
            m = _native_call({"call": "patterns-match", "patterns": self._patterns, "line": line})
            return None if m is None else (m["pattern"], dict(m["captures"]))
        m = self._set.first_match(line)
        return None if m is None else (m.pattern, dict(m.captures))


NOT_FRAMED = "not in the schema registry's wire format: a record starts with a zero byte and a 4-byte schema id"
"""The reason to reject a record that `framed` finds no header in."""


def framed(payload: Union[bytes, bytearray, memoryview]):
    """A payload framed for a schema registry (Confluent's wire format: a
    zero byte, the schema id in 4 bytes big-endian, the encoded record):
    `(id, body)`, body the bytes after the header; None when the payload
    is not framed. Reject such a record with `NOT_FRAMED`."""
    if not isinstance(payload, _BYTES_LIKE):
        raise TypeError(f"framed takes bytes (a record's payload), not {_a(type(payload).__name__)}")
    view = memoryview(payload).cast("B")
    if len(view) < 5 or view[0] != 0:
        return None
    return int.from_bytes(view[1:5], "big"), bytes(view[5:])


class RegisteredSchema(tuple):
    """A schema as the registry holds it: `schema_type` (`AVRO`,
    `PROTOBUF` or `JSON`) and `text`; unpacks as `(schema_type, text)`."""

    __slots__ = ()

    def __new__(cls, schema_type: str, text: str):
        return super().__new__(cls, (schema_type, text))

    @property
    def schema_type(self) -> str:
        return self[0]

    @property
    def text(self) -> str:
        return self[1]


def _schema_id(value, what: str) -> int:
    """A schema id: an int in 0..2**32-1."""
    if not isinstance(value, int) or isinstance(value, bool):
        raise TypeError(f"{what} takes a schema id (an int), not {_a(type(value).__name__)}")
    if not 0 <= value <= 0xFFFFFFFF:
        raise ValueError(f"{what}: {value} is not a schema id (0 to 4294967295)")
    return value


# What `schema` and `schema_references` answer outside the component
# (`register_schema`).
_native_schemas: Dict[int, RegisteredSchema] = {}
_native_references: Dict[int, List[tuple]] = {}


def schema(id: int) -> RegisteredSchema:
    """The schema the registry holds under `id` (what `framed` read). No
    I/O: the host fetched every id of the batch before the plugin was
    called. `ValueError` with the host's reason, a good reject reason as it
    is, when the registry has no such schema, the host never fetched `id`,
    or the pipeline has no `[schema_registry]`. Ask once per new id and
    keep what you parse: an id never changes what it means."""
    id = _schema_id(id, "schema")
    if NATIVE:
        found = _native_schemas.get(id)
        if found is None:
            raise ValueError(f"schema id {id} is not in the schema registry")
        return found
    try:
        schema_type, text = helpers.schema(id)
    except Err as e:
        raise _host_error(e) from None
    return RegisteredSchema(schema_type, text)


def schema_references(id: int) -> List[tuple]:
    """The schemas the one under `id` references (Confluent's schema
    references: an Avro named type, a Protobuf import, a JSON Schema
    `$ref` kept under another subject), as `(name, text)` pairs, every
    one the references reach, each before any that needs it: the order to
    parse them in. Empty for a schema with none. Raises as `schema`."""
    id = _schema_id(id, "schema_references")
    if NATIVE:
        schema(id)
        return list(_native_references.get(id, ()))
    try:
        return [tuple(pair) for pair in helpers.schema_references(id)]
    except Err as e:
        raise _host_error(e) from None


def register_schema(id: int, schema_type: str, text: str, references=()) -> None:
    """For a plugin's unit tests in plain Python: what `schema(id)` (and,
    with `references` as `(name, text)` pairs, `schema_references(id)`)
    answers from now on. In a pipeline the host fetches schemas from the
    registry instead."""
    if not NATIVE:
        raise RuntimeError("register_schema is for unit tests in plain Python; in a pipeline the host fetches schemas from [schema_registry]")
    id = _schema_id(id, "register_schema")
    _native_schemas[id] = RegisteredSchema(_text(schema_type, "register_schema"), _text(text, "register_schema"))
    pairs = []
    for pair in references:
        if not isinstance(pair, (tuple, list)) or len(pair) != 2:
            raise TypeError(f"register_schema's references are (name, text) pairs, not {_a(type(pair).__name__)}")
        pairs.append((_text(pair[0], "register_schema"), _text(pair[1], "register_schema")))
    _native_references[id] = pairs


# The host's helpers outside the component: one `sluice plugin helpers`
# per test run, a JSON request and answer per line (host/src/cli/helpers.rs).
_native_host = None


def _native_call(request: Dict[str, Any]) -> Any:
    global _native_host
    import os
    import shutil
    import subprocess

    if _native_host is None or _native_host.poll() is not None:
        exe = os.environ.get("SLUICE") or shutil.which("sluice")
        if not exe:
            raise RuntimeError(
                "TimeFormat, Patterns and run_natively's judging run the host's own code: put `sluice` "
                "on the PATH, or set SLUICE to its path, to use them in a unit test"
            )
        _native_host = subprocess.Popen(
            [exe, "plugin", "helpers"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, encoding="utf-8"
        )
    _native_host.stdin.write(json.dumps(request) + "\n")
    _native_host.stdin.flush()
    line = _native_host.stdout.readline()
    if not line:
        raise RuntimeError(f"`sluice plugin helpers` ended without answering (exit {_native_host.wait()})")
    answer = json.loads(line)
    if "err" in answer:
        raise ValueError(answer["err"])
    return answer["ok"]


def format_rfc3339(nanos: int) -> str:
    """Nanoseconds since the epoch as RFC 3339 in UTC, as sinks write it."""
    nanos = _nanos(nanos, "format_rfc3339")
    if NATIVE:
        secs, frac = divmod(nanos, 1_000_000_000)
        text = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(secs))
        return text + (("." + f"{frac:09d}".rstrip("0")) if frac else "") + "Z"
    return helpers.format_rfc3339(nanos)


def logfmt(line: Union[bytes, str]) -> Dict[str, Any]:
    """The `key=value` pairs of a logfmt line as a dict, in order: quoted
    values may hold spaces and `\\"`; a bare key maps to True; a later key
    replaces an earlier one."""
    # bytes(b) of bytes is b itself: a record's payload keeps its identity.
    line = _bytes(line, "logfmt")
    if NATIVE:
        return dict(_logfmt_natively(bytes(line).decode("utf-8", "replace")))
    # One JSON text and Python's own (C) parser: a list of pairs lifted
    # element by element costs several times as much. The text is kept
    # for `emit`. The payload a record just handed out is answered from
    # one `logfmt-batch` call for its whole batch: a host call per record,
    # with its argument lowered byte by byte, costs more than the split.
    last = _last_payload
    if last is not None and line is last[0]:
        b = last[1]
        texts = b.logfmt_texts
        if texts is None:
            try:
                texts = b.logfmt_texts = helpers.logfmt_batch().split("\n")
            except Err:
                # Past the memory limit as one text: record by record.
                texts = b.logfmt_texts = ()
        i = last[2]
        text = texts[i] if i < len(texts) else helpers.logfmt_object(line)
    else:
        text = helpers.logfmt_object(line)
    pairs = _HostJson(json.loads(text))
    pairs._text = text
    return pairs


def json_get(payload: Union[bytes, str], *paths: str) -> List[Any]:
    """The values at dotted paths (`"user.id"`, `"tags.0"`) of the JSON
    object `payload`, one per path, None where it holds nothing; the
    payload is parsed by the host, not by Python. `ValueError` when it is
    not one JSON object."""
    data = _bytes(payload, "json_get")
    if len(paths) == 1 and isinstance(paths[0], (list, tuple)):
        paths = paths[0]  # json_get(p, ["a", "b"]): the list is the paths
    paths = _texts(paths, "json_get's paths")
    if NATIVE:
        return _json_get_natively(data, paths)
    try:
        found = helpers.json_get(data, paths)
    except Err as e:
        raise _host_error(e) from None
    return [None if v is None else json.loads(v) for v in found]


def json_object_check(payload: Union[bytes, str]) -> Optional[str]:
    """None when `payload` is one JSON object in UTF-8 (the rule every
    event body meets); else why not."""
    data = _bytes(payload, "json_object_check")
    if NATIVE:
        # The host's rule and words (plugin/output_rules.rs), in Python.
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError as e:
            return f"the body is not UTF-8 (invalid byte at offset {e.start})"
        first = text.lstrip()[:1]
        if first == "[":
            return "the body is a JSON array, not an object"
        if not first:
            return "the body is empty, not a JSON object"
        try:
            json.loads(text)
        except ValueError as e:
            return f"the body is not valid JSON ({e})" if first == "{" else "the body is not JSON"
        return None if first == "{" else "the body is a JSON scalar, not an object"
    return helpers.json_object_check(data)


def _logfmt_natively(line: str):
    line = line.rstrip("\r\n")
    i, n = 0, len(line)
    while i < n:
        while i < n and line[i] == " ":
            i += 1
        start = i
        while i < n and line[i] not in "= ":
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
                yield key, "".join(value)
        elif key:
            yield key, True


def _json_get_natively(data: bytes, paths) -> List[Any]:
    reason = json_object_check(data)
    if reason:
        raise ValueError(reason)
    root = json.loads(data.decode("utf-8"))
    out = []
    for path in paths:
        at = root
        for segment in path.split("."):
            if isinstance(at, dict) and segment in at:
                at = at[segment]
            elif isinstance(at, list) and segment.isdigit() and int(segment) < len(at):
                at = at[int(segment)]
            else:
                at = None
                break
        out.append(at)
    return out


def _a(noun: str) -> str:
    """`noun` with its article: "an int", "a str"."""
    return ("an " if noun[:1].lower() in "aeiou" else "a ") + noun


class Plugin:
    """Override `process`; override `setup` to read or refuse the config.
    List the config's keys in `config_keys` to have any other refused."""

    config_keys: Optional[Iterable[str]] = None

    def setup(self, config: Dict[str, Any]) -> None:
        self.config = config

    def process(self, record: Record) -> Outcome:
        raise NotImplementedError("a plugin overrides process(record)")


class _Batch:
    """A batch's buffers, read in place: the descriptors as 32- and 64-bit
    views (the record table is 64 bytes per record, so both casts fit)."""

    __slots__ = ("u32", "i64", "headers", "data", "partitions", "logfmt_texts")

    def __init__(self, batch):
        records = memoryview(batch.records)
        self.u32 = records.cast("I")
        self.i64 = records.cast("q")
        self.headers = memoryview(batch.headers).cast("I")
        self.data = batch.data
        self.partitions = [(p.source, p.name) for p in batch.partitions]
        # `logfmt-batch`'s answer, one text per record, once asked.
        self.logfmt_texts = None


class _BatchRecord:
    """A record of a batch, its fields read when the plugin asks for them:
    a plugin pays only for what it reads (in CPython a field read costs a
    fraction of building every field of every record)."""

    __slots__ = ("_b", "_i")

    def __init__(self, b: _Batch, i: int):
        self._b = b
        self._i = i

    def _slice(self, at: int) -> bytes:
        u = self._b.u32
        o = u[at]
        return self._b.data[o:o + u[at + 1]]

    def _flag(self, bit: int) -> bool:
        return bool(self._b.u32[self._i * 16 + 15] & bit)

    @property
    def payload(self) -> bytes:
        global _last_payload
        value = self._slice(self._i * 16)
        _last_payload = (value, self._b, self._i)
        return value

    @property
    def key(self) -> Optional[bytes]:
        return self._slice(self._i * 16 + 2) if self._flag(_KEY) else None

    @property
    def headers(self) -> List:
        b, k = self._b, self._i * 16
        out = []
        for h in range(b.u32[k + 4], b.u32[k + 4] + b.u32[k + 5]):
            no, nl, vo, vl = b.headers[h * 4:h * 4 + 4]
            out.append((b.data[no:no + nl].decode(), b.data[vo:vo + vl]))
        return out

    @property
    def source_timestamp(self) -> Optional[int]:
        return self._b.i64[self._i * 8 + 4] if self._flag(_SOURCE_TS) else None

    @property
    def timestamp(self) -> Optional[int]:
        return self._b.i64[self._i * 8 + 5] if self._flag(_TS) else None

    @property
    def event_id(self) -> Optional[str]:
        return self._slice(self._i * 16 + 6).decode() if self._flag(_EVENT_ID) else None

    @property
    def position(self) -> Position:
        source, name = self._b.partitions[self._b.u32[self._i * 16 + 14]]
        return Position(source, name, self._b.i64[self._i * 8 + 6])


def _unpack(batch) -> List[_BatchRecord]:
    # Nothing is checked up front: the host packs with the tested layout of
    # sluice-abi, and a bad slice or index could only make a field read
    # raise (IndexError), which rejects that record, naming the error.
    b = _Batch(batch)
    return [_BatchRecord(b, i) for i in range(len(batch.records) // 64)]


def _pack(outcomes: List[Outcome]):
    # The descriptor fields are gathered in flat lists and packed with one
    # struct call per table: one call per event costs more than the rest.
    table = []
    events = []
    data = bytearray()
    count = 0
    for o in outcomes:
        marks = (len(events), len(data), count)
        try:
            if o.kind == _EMIT:
                first = count
                for e in o.value:
                    flags = 0
                    io = il = 0
                    if e.id is not None:
                        flags = _EV_ID
                        raw = e.id.encode()
                        io, il = len(data), len(raw)
                        data += raw
                    if e.body is _KEPT:
                        flags |= _EV_KEEP
                        bo = bl = 0
                    else:
                        bo = len(data)
                        data += e.body
                        bl = len(data) - bo
                    ts = e.timestamp
                    if ts is not None:
                        flags |= _EV_TS
                        if not isinstance(ts, int):
                            raise TypeError("timestamp")
                    else:
                        ts = 0
                    ro = 0
                    sinks = e.sinks
                    if sinks is not None:
                        # A route: a length, then the names joined by ",".
                        flags |= _EV_SINKS
                        raw = (sinks if isinstance(sinks, str) else ",".join(sinks)).encode()
                        ro = len(data)
                        data += struct.pack("<I", len(raw))
                        data += raw
                    events += (io, il, bo, bl, ts, flags, ro)
                    count += 1
                table += (_EMIT, first, count - first)
            else:
                raw = o.value.encode()
                table += (o.kind, len(data), len(raw))
                data += raw
        except Exception:
            # Something that is not an outcome, or an event whose fields are
            # of the wrong type: undo what it wrote, and reject its record
            # naming what was wrong, so that the rest of the batch stands.
            del events[marks[0]:]
            del data[marks[1]:]
            count = marks[2]
            raw = _fault(o).encode()
            table += (_REJECT, len(data), len(raw))
            data += raw
    try:
        packed = struct.pack("<" + "IIIIqII" * count, *events)
    except struct.error:
        # A timestamp out of the 64-bit range: find its record the slow way.
        return _pack(_out_of_range_rejected(outcomes))
    return types.Outcomes(outcomes=struct.pack("<%dI" % len(table), *table), events=packed, data=bytes(data))


def _out_of_range_rejected(outcomes: List[Outcome]) -> List[Outcome]:
    def out_of_range(o) -> bool:
        try:
            events = o.value if isinstance(o, Outcome) and o.kind == _EMIT else ()
            return any(isinstance(e.timestamp, int) and not -(1 << 63) <= e.timestamp < (1 << 63) for e in events)
        except Exception:
            return False  # not an outcome of events: _pack names what it is

    return [
        reject("an event timestamp is out of the 64-bit range (nanoseconds since the epoch)") if out_of_range(o) else o
        for o in outcomes
    ]


def _fault(o) -> str:
    """Why `o` could not be packed, for the rejection of its record."""
    if not isinstance(o, Outcome):
        return f"process returned {type(o).__name__}, not emit(...), drop(...) or reject(...)"
    if o.kind != _EMIT:
        return "a drop or reject reason must be a str"
    for k, e in enumerate(o.value):
        if not isinstance(e, Event):
            return f"event {k} is {_a(type(e).__name__)}, not an event(...)"
        if not isinstance(e.body, (bytes, bytearray)):
            return f"event {k}: body is {_a(type(e.body).__name__)}, not bytes"
        if e.id is not None and not isinstance(e.id, str):
            return f"event {k}: id is {_a(type(e.id).__name__)}, not a str"
        if e.timestamp is not None and not isinstance(e.timestamp, int):
            return f"event {k}: timestamp is {_a(type(e.timestamp).__name__)}, not an int (nanoseconds)"
        if e.sinks is not None and not (isinstance(e.sinks, str) or all(isinstance(n, str) for n in e.sinks)):
            return f"event {k}: sinks is not a list of sink names (str)"
    return "process returned an outcome that cannot be packed"


def _sdk_frame(filename: str) -> bool:
    # By the file's name: inside a component the module's `__file__` and
    # its frames' paths need not be written alike.
    return filename.replace("\\", "/").rsplit("/", 1)[-1] == "sluice_plugin.py"


def _reason(e: Exception) -> str:
    # The line in the plugin's code, not in this SDK's (a helper given the
    # wrong type raises in here): the last frame that is not the SDK's.
    frames = traceback.extract_tb(e.__traceback__)
    mine = [f for f in frames if not _sdk_frame(f.filename)] or frames
    at = mine[-1]
    where = at.filename.replace("\\", "/").rsplit("/", 1)[-1]
    return f"{type(e).__name__}: {e} (line {at.lineno}{'' if where in ('', '<string>') else ' of ' + where})"


def _configured(plugin_class, config: Dict[str, Any]):
    """A plugin set up with `config`, its keys checked first when it lists
    them."""
    plugin = plugin_class()
    known = plugin_class.config_keys
    if known is not None:
        unknown = sorted(set(config) - set(known))
        if unknown:
            raise ValueError(
                f"unknown config key {unknown[0]!r} (this plugin reads: {', '.join(sorted(known)) or 'none'})"
            )
    plugin.setup(config)
    return plugin


def run_natively(
    plugin_class, config: Dict[str, Any], payloads: Iterable[Union[bytes, str]], now: Optional[Union[int, str]] = None
) -> List[Outcome]:
    """Each payload through the plugin in plain Python, judged as the host
    judges it: config keys checked, then `setup`; an exception in `process`
    rejects its record, naming the plugin's line; what is not an outcome
    (`None`, a dict) rejects its record; and every outcome is checked by the
    host's own output rules (`sluice plugin helpers`, so `sluice` on the
    PATH or $SLUICE): an empty or oversized id, a body that is not one JSON
    object, too many events reject the record with the host's reason.

    `now` pins the clock for this run (`pin_now`): nanoseconds, or RFC 3339
    text as a case's `now`. For a plugin's unit tests."""
    global _pinned_now
    pinned = _pinned_now
    if now is not None:
        pin_now(now)
    try:
        plugin = _configured(plugin_class, config)
        out = []
        for p in payloads:
            payload = _bytes(p, "run_natively's payloads")
            try:
                o = plugin.process(Record(payload))
            except Exception as e:
                o = reject(_reason(e))
            out.append(_judged(o, payload))
        return out
    finally:
        _pinned_now = pinned


def _judged(o, payload: bytes) -> Outcome:
    """`o` as the host takes it: a reject when it is not an outcome, or
    when the host's output rules refuse it (asked of the host's code)."""
    if not isinstance(o, Outcome):
        return reject(_fault(o))
    if o.kind != _EMIT:
        return o if isinstance(o.value, str) else reject(_fault(o))
    try:
        events = [
            {
                "id": e.id,
                "timestamp": None if e.timestamp is None else str(_nanos(e.timestamp, "timestamp")),
                "keep": e.body is _KEPT,
                "body_b64": "" if e.body is _KEPT else _b64(e.body),
                "sinks": e.sinks if e.sinks is None or isinstance(e.sinks, str) else ",".join(e.sinks),
            }
            for e in o.value
        ]
        if any(e["id"] is not None and not isinstance(e["id"], str) for e in events):
            raise TypeError("id")
    except Exception:
        return reject(_fault(o))
    rule = _native_call({"call": "judge", "payload_b64": _b64(payload), "events": events})
    return o if rule is None else reject(rule)


def _b64(data) -> str:
    import base64

    return base64.b64encode(bytes(data)).decode()


def export(plugin_class):
    """The class componentize-py exports for sluice's world."""

    class Export(WitWorld):
        instance = None

        def init(self, config: str) -> None:
            try:
                plugin = _configured(plugin_class, json.loads(config))
            except Exception as e:  # the operator sees this message
                raise Err(str(e) or type(e).__name__)
            Export.instance = plugin

        def process(self, batch) -> "types.Outcomes":
            global _batch_now, _last_payload
            _batch_now = _last_payload = None
            plugin = Export.instance
            try:
                records = _unpack(batch)
            except Exception as e:
                n = len(batch.records) // 64
                return _pack([reject(f"the SDK cannot read the batch: {_reason(e)}")] * n)
            if plugin is None:
                return _pack([reject("plugin used before init")] * len(records))
            out = []
            for record in records:
                try:
                    o = plugin.process(record)
                except Exception as e:
                    o = reject(_reason(e))
                out.append(o)
            # Nothing of this batch is kept past its call.
            _last_payload = None
            return _pack(out)

    return Export
