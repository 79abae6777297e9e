"""Write sluice classifier plugins in Python: read how a backend answered
one request of the HTTP sink (`wit/classifier.wit`), for a backend no
built-in profile covers.

A classifier subclasses `Classifier` and overrides
`classify(request, response)`, returning `each([...])`, `for_all(fate)`,
`split(reason)` or `bad_row(row, reason)`, where a fate is `accepted()`,
`duplicate()`, `retry(reason)`, `reject(reason)` or `systemic(reason)`.
The module ends with

    WitWorld = export(MyClassifier)

and componentize-py builds it against the classifier world:

    componentize-py -d wit -w classifier componentize my_classifier -o my_classifier.wasm

An exception raised by `classify` answers systemic, with the exception as
the reason: the records wait behind the breaker, none is quarantined for
the classifier's fault. The host's fixed rules apply after the reply (a
404 stays systemic whatever the classifier says).

`Request` reads the packed request lazily: `len(request)`,
`request.id(i)`, `request.timestamp(i)` (ns, or None), `request.span(i)`
(the record's bytes in the request body) and `request.record_at(pos)`.
Natively (unit tests), `Request.of(ids, timestamps, spans)` and
`Response(status, body)` build what the host would pass.
"""

import json
import struct
import sys
from typing import Any, Dict, List, Optional, Tuple

try:
    from componentize_py_types import Err
    from wit_world import WitWorld
    from wit_world.imports import answers, log, types

    NATIVE = False
except ImportError:
    NATIVE = True
    WitWorld = object
    answers = log = types = None

_RECORD = 32


class Request:
    """What was sent: per record its id, timestamp and span."""

    def __init__(self, records: bytes = b"", ids: bytes = b"", body_bytes: int = 0, attempt: int = 1):
        self._records = records
        self._ids = ids
        self.body_bytes = body_bytes
        self.attempt = attempt

    @staticmethod
    def of(ids: List[str], timestamps: Optional[List[Optional[int]]] = None,
           spans: Optional[List[Tuple[int, int]]] = None) -> "Request":
        records, data = bytearray(), bytearray()
        for i, id in enumerate(ids):
            ts = timestamps[i] if timestamps else None
            start, length = spans[i] if spans else (0, 0)
            raw = id.encode()
            records += struct.pack("<IIIIqII", len(data), len(raw), start, length, ts or 0, 1 if ts is not None else 0, 0)
            data += raw
        return Request(bytes(records), bytes(data))

    def __len__(self) -> int:
        return len(self._records) // _RECORD

    def id(self, i: int) -> str:
        start, length = struct.unpack_from("<II", self._records, i * _RECORD)
        return self._ids[start:start + length].decode("utf-8", "replace")

    def timestamp(self, i: int) -> Optional[int]:
        ts, flags = struct.unpack_from("<qI", self._records, i * _RECORD + 16)
        return ts if flags & 1 else None

    def span(self, i: int) -> Tuple[int, int]:
        return struct.unpack_from("<II", self._records, i * _RECORD + 8)

    def record_at(self, pos: int) -> Optional[int]:
        for i in range(len(self)):
            start, length = self.span(i)
            if start <= pos < start + length:
                return i
        return None


class Response:
    """What came back: `status`, `headers` (a dict, names in lower case,
    only those the config lists), `body` (bytes) and `truncated`."""

    def __init__(self, status: int, body: bytes = b"", headers: Optional[Dict[str, str]] = None, truncated: bool = False):
        self.status = status
        self.body = body
        self.headers = headers or {}
        self.truncated = truncated

    def json(self) -> Any:
        """The body as JSON; raises ValueError naming why not."""
        if self.truncated:
            raise ValueError(f"the body was cut at {len(self.body)} bytes")
        try:
            return json.loads(self.body)
        except ValueError as e:
            raise ValueError(f"the body is not the JSON expected: {e}")

    def excerpt(self) -> str:
        text = " ".join(self.body[:400].decode("utf-8", "replace").split())
        return f"HTTP {self.status}: {text}" if text else f"HTTP {self.status}"


# Fates: plain tuples natively, the bindings' types in the component.
def accepted():
    return ("accepted", None)


def duplicate():
    return ("duplicate", None)


def retry(reason: str):
    return ("retry", str(reason))


def reject(reason: str):
    return ("reject", str(reason))


def systemic(reason: str):
    return ("systemic", str(reason))


def each(fates: list):
    return ("each", list(fates))


def for_all(fate):
    """One fate for every record (the WIT's `all`: named apart from
    Python's builtin `all`, which a plugin's module keeps)."""
    return ("all", fate)


def split(reason: str):
    return ("split", str(reason))


def bad_row(row: int, reason: str):
    return ("bad-row", (int(row), str(reason)))


def info(message: str) -> None:
    if NATIVE:
        print(f"info: {message}", file=sys.stderr)
    else:
        log.log(types.Level.INFO, message)


class Classifier:
    """Subclass and override `classify`; `setup(config)` may raise
    ValueError to refuse the config (name the key)."""

    def setup(self, config: Dict[str, Any]) -> None:
        if config:
            raise ValueError(f"unknown config keys: {', '.join(sorted(config))}")

    def classify(self, request: Request, response: Response):
        raise NotImplementedError


def _fate(f):
    kind, reason = f
    if kind == "accepted":
        return answers.Fate_Accepted()
    if kind == "duplicate":
        return answers.Fate_Duplicate()
    if kind == "retry":
        return answers.Fate_Retry(reason)
    if kind == "reject":
        return answers.Fate_Reject(reason)
    if kind == "systemic":
        return answers.Fate_Systemic(reason)
    raise ValueError(f"not a fate: {f!r}")


def _lower(reply):
    kind, value = reply
    if kind == "each":
        return answers.Reply_Each([_fate(f) for f in value])
    if kind == "all":
        return answers.Reply_All(_fate(value))
    if kind == "split":
        return answers.Reply_Split(value)
    if kind == "bad-row":
        return answers.Reply_BadRow(answers.BadRow(value[0], value[1]))
    raise ValueError(f"not a reply: {reply!r}")


def export(classifier_class):
    """The class componentize-py exports for the classifier world."""

    class Export(WitWorld):
        instance = None

        def init(self, config: str) -> None:
            try:
                c = classifier_class()
                c.setup(json.loads(config or "{}"))
            except Exception as e:
                raise Err(str(e) or type(e).__name__)
            Export.instance = c

        def classify(self, request, response):
            c = Export.instance
            if c is None:
                return _lower(for_all(systemic("classifier used before init")))
            req = Request(request.records, request.ids, request.body_bytes, request.attempt)
            resp = Response(response.status, response.body, dict(response.headers), response.truncated)
            try:
                return _lower(c.classify(req, resp))
            except Exception as e:
                return _lower(for_all(systemic(f"classifier failed: {type(e).__name__}: {e}")))

    return Export
