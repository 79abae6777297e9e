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
"""

import json
import traceback
from typing import Any, Dict, List, Optional, Union

from componentize_py_types import Err
from wit_world import WitWorld
from wit_world.imports import clock, log, types

Record = types.Record
Outcome = types.Outcome


def emit(body: Union[Dict[str, Any], bytes, str], id: Optional[str] = None, timestamp: Optional[int] = None) -> Outcome:
    """One event. `body` is a dict (serialized to JSON) or JSON text/bytes;
    `timestamp` is nanoseconds since the Unix epoch."""
    return emit_many([event(body, id, timestamp)])


def event(body: Union[Dict[str, Any], bytes, str], id: Optional[str] = None, timestamp: Optional[int] = None) -> types.Event:
    if isinstance(body, dict):
        raw = json.dumps(body, separators=(",", ":"), ensure_ascii=False).encode()
    elif isinstance(body, str):
        raw = body.encode()
    else:
        raw = bytes(body)
    return types.Event(id=id, timestamp=timestamp, body=raw)


def emit_many(events: List[types.Event]) -> Outcome:
    """Several events from one record (a split), or none."""
    return types.Outcome_Emit(events)


def drop(reason: str) -> Outcome:
    """Filtered on purpose: counted per plugin and reason, never delivered."""
    return types.Outcome_Drop(reason)


def reject(reason: str) -> Outcome:
    """Never valid: the record goes to the quarantine with this reason."""
    return types.Outcome_Reject(reason)


def now_nanos() -> int:
    """The host's clock (the plugin has no other)."""
    return clock.now()


def info(message: str) -> None:
    log.log(types.Level.INFO, message)


def warn(message: str) -> None:
    log.log(types.Level.WARN, message)


class Plugin:
    """Override `process`; override `setup` to read or refuse the config."""

    def setup(self, config: Dict[str, Any]) -> None:
        self.config = config

    def process(self, record: Record) -> Outcome:
        raise NotImplementedError("a plugin overrides process(record)")


def export(plugin_class):
    """The class componentize-py exports for sluice's world."""

    class Export(WitWorld):
        instance = None

        def init(self, config: str) -> None:
            try:
                plugin = plugin_class()
                plugin.setup(json.loads(config))
            except Exception as e:  # the operator sees this message
                raise Err(str(e) or type(e).__name__)
            Export.instance = plugin

        def process(self, batch: List[Record]) -> List[Outcome]:
            plugin = Export.instance
            if plugin is None:
                return [reject("plugin used before init") for _ in batch]
            out = []
            for record in batch:
                try:
                    out.append(plugin.process(record))
                except Exception as e:
                    where = traceback.extract_tb(e.__traceback__)[-1]
                    out.append(reject(f"{type(e).__name__}: {e} (line {where.lineno})"))
            return out

    return Export
