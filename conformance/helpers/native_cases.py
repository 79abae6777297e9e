"""The helpers cases, run natively: the Python helpers demo in plain
Python (no component, no build), its helpers answered by the host's own
code through `sluice plugin helpers` ($SLUICE or the PATH). A case that
passes here and through the built component proves a plugin's unit tests
see what the pipeline sees.

    python3 conformance/helpers/native_cases.py conformance/helpers/cases/0[1235]-*.json

Case 04 (attacks) is not run natively: its bounds are an instance's
(live resources, memory), which only the component has.
Prints one line per case; exits 1 when any fails."""

import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:0] = [os.path.join(HERE, "..", "..", "guest-sdk", "python"), HERE]

from helpers_demo import HelpersDemo  # noqa: E402
from sluice_plugin import format_rfc3339, run_natively  # noqa: E402


def check(outcome, want):
    """None when `outcome` is what `want` (a case's expected outcome, in the
    words config cases use) says; else why not."""
    for verdict, door in (("drop", "drop"), ("reject", "quarantine")):
        if door in want:
            if outcome.verdict != verdict or want[door] not in outcome.reason:
                return f"want {door} containing {want[door]!r}, got {outcome!r}"
            return None
    events = [want["event"]] if "event" in want else want["events"]
    if outcome.verdict != "emit" or len(outcome.events) != len(events):
        return f"want {len(events)} event(s), got {outcome!r}"
    for got, e in zip(outcome.events, events):
        if e.get("id") != got.id:
            return f"id: want {e.get('id')!r}, got {got.id!r}"
        if e.get("timestamp") is not None and format_rfc3339(got.timestamp) != e["timestamp"]:
            return f"timestamp: want {e['timestamp']}, got {format_rfc3339(got.timestamp)}"
        body = got.json()
        if "body" in e and body != e["body"]:
            return f"body: want {json.dumps(e['body'])}, got {json.dumps(body)}"
        for k, v in e.get("fields", {}).items():
            if body.get(k) != v:
                return f"{k}: want {json.dumps(v)}, got {json.dumps(body.get(k))}"
    return None


def main(paths):
    failed = 0
    for path in paths:
        with open(path, encoding="utf-8") as f:
            case = json.load(f)
        records = case.get("records", case.get("input", []))
        payloads = [(r if isinstance(r, str) else r["payload"]).encode("utf-8") for r in records]
        expect = case["expect"]
        refusal = expect.get("init_error") if isinstance(expect, dict) else None
        try:
            # The case's `now` pins the clock, as `sluice plugin test` does.
            outcomes = run_natively(HelpersDemo, case.get("config", {}), payloads, now=case.get("now"))
        except ValueError as e:
            if refusal is None:
                raise
            why = [] if refusal in str(e) else [f"setup refused with {str(e)!r}, expected {refusal!r}"]
        else:
            if refusal is not None:
                why = [f"setup accepted the config; expected a refusal containing {refusal!r}"]
            else:
                wants = expect
                why = [f"record {i}: {w}" for i, w in enumerate(map(check, outcomes, wants)) if w]
                if len(outcomes) != len(wants):
                    why.append(f"{len(wants)} outcomes expected, {len(outcomes)} given")
        print(f"{'ok  ' if not why else 'FAIL'} {os.path.basename(path)}{''.join(chr(10) + '     ' + w for w in why)}")
        failed += bool(why)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
