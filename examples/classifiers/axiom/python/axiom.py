"""Axiom's ingest answers, read per record (the Rust version's README
says why): a failure names the time of the event it refused, so it is
matched to the one record sent with that time; otherwise split.

    componentize-py -d wit -w classifier componentize -p guest-sdk/python \\
        -p examples/classifiers/axiom/python axiom -o axiom.wasm
"""

import re

from sluice_classifier import Classifier, accepted, each, export, for_all, reject, split, systemic

_RFC3339 = re.compile(r"(\d{4})-(\d\d)-(\d\d)[Tt ](\d\d):(\d\d):(\d\d)(?:\.(\d+))?(?:([Zz])|([+-])(\d\d):(\d\d))$")


def _days_from_civil(y: int, m: int, d: int) -> int:
    y -= m <= 2
    era = y // 400
    yoe = y - era * 400
    doy = (153 * ((m + 9) % 12) + 2) // 5 + d - 1
    return era * 146097 + yoe * 365 + yoe // 4 - yoe // 100 + doy - 719468


def rfc3339_nanos(text):
    """`2024-05-01T12:00:01.5Z` (or with an offset) as ns, or None."""
    m = _RFC3339.match(text or "")
    if not m:
        return None
    y, mo, d, h, mi, s = (int(m.group(i)) for i in range(1, 7))
    frac = int((m.group(7) or "")[:9].ljust(9, "0"))
    offset = 0
    if m.group(9):
        offset = int(m.group(10)) * 3600 + int(m.group(11)) * 60
        offset = -offset if m.group(9) == "-" else offset
    return (_days_from_civil(y, mo, d) * 86400 + h * 3600 + mi * 60 + s - offset) * 1_000_000_000 + frac


class Axiom(Classifier):
    def classify(self, request, response):
        n = len(request)
        if response.status in (400, 413, 422):
            return split(response.excerpt())
        if not 200 <= response.status < 300:
            return for_all(systemic(response.excerpt()))
        try:
            ingest = response.json()
            ingested, failed = int(ingest["ingested"]), int(ingest["failed"])
            failures = ingest.get("failures") or []
        except (ValueError, KeyError, TypeError) as e:
            return for_all(systemic(f"HTTP {response.status}: {e}"))
        if ingested + failed != n:
            return for_all(systemic(f"Axiom counted {ingested} ingested and {failed} failed of the {n} sent"))
        if failed == 0:
            return for_all(accepted())
        first = failures[0].get("error", "") if failures else "no failure listed"
        whole = split(f"axiom: {failed} of {n} failed: {first}")
        if len(failures) != failed:
            return whole
        # One pass over the request: each time to its record, or to None
        # when two records share it (which one failed is then unknown).
        by_time = {}
        for i in range(n):
            ns = request.timestamp(i)
            if ns is not None:
                by_time[ns] = None if ns in by_time else i
        fates = [accepted()] * n
        for f in failures:
            i = by_time.get(rfc3339_nanos(f.get("timestamp")))
            if i is None or fates[i] != accepted():
                return whole
            fates[i] = reject(f"axiom: {f.get('error', '')}")
        return each(fates)


WitWorld = export(Axiom)
