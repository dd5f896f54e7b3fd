"""The batch / real-time split of a summary's ``totals`` (pure: no I/O, cheap to import).

>>> totals = {"input_tokens": 0, "output_tokens": 0, "cost_usd": 0.0}
>>> parts = [{"totals": {"batch": {"input_tokens": 10, "output_tokens": 2, "cost_usd": 0.5, "lines": 1},
...                      "realtime": {"input_tokens": 4, "output_tokens": 1, "cost_usd": 1.0}}},
...          {"totals": {"input_tokens": 6, "output_tokens": 1, "cost_usd": 2.0}}]
>>> merge_split_totals(totals, parts)
>>> totals["cost_usd"], totals["batch"]["lines"], totals["realtime"]["input_tokens"]
(3.5, 1, 10)
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

FIELDS = ("input_tokens", "output_tokens", "cost_usd")


def merge_split_totals(totals: dict[str, Any], parts: Iterable[Mapping[str, Any]]) -> None:
    """``totals`` of several summaries (shards) with their ``batch`` / ``realtime`` split added up;
    a part without the split spent all of its totals in real time. No split anywhere: unchanged."""
    splits = [p.get("totals") or {} for p in parts]
    if not any("batch" in t for t in splits):
        return
    batch: dict[str, Any] = dict.fromkeys(FIELDS, 0) | {"lines": 0}
    realtime: dict[str, Any] = dict.fromkeys(FIELDS, 0)
    for t in splits:
        for k in FIELDS:
            batch[k] += (t.get("batch") or {}).get(k, 0)
            realtime[k] += (t.get("realtime") or t).get(k, 0)
        batch["lines"] += (t.get("batch") or {}).get("lines", 0)
    for k in FIELDS:
        totals[k] = batch[k] + realtime[k]
    for d in (totals, batch, realtime):
        d["cost_usd"] = round(d["cost_usd"], 8)
    totals["batch"] = batch
    totals["realtime"] = realtime
