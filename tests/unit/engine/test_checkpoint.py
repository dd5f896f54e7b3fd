"""The checkpoint's fingerprint of what shapes a run's rows (issue 17)."""

from __future__ import annotations

from typing import Any

from assay.config import RunConfig
from assay.pipeline.checkpoint import fingerprint, fingerprint_change


def _config(**over: Any) -> RunConfig:
    data: dict[str, Any] = {
        "source": {"path": "in.jsonl"},
        "evaluators": [{"name": "exact_match"}],
        "judges": {"j": {"model": "m1", "rpm": 60}},
        "sink": {"path": "out/"},
        **over,
    }
    return RunConfig.model_validate(data)


def test_what_shapes_rows_changes_the_fingerprint() -> None:
    base = fingerprint(_config())
    assert fingerprint_change(base, fingerprint(_config())) == []
    changed = _config(evaluators=[{"name": "exact_match", "params": {"key": "em"}}])
    assert fingerprint_change(base, fingerprint(changed)) == ["evaluators"]
    assert fingerprint_change(base, fingerprint(_config(judges={"j": {"model": "m2", "rpm": 60}}))) == ["judges"]
    assert fingerprint_change(base, fingerprint(_config(sink={"path": "out/", "compression": "gzip"}))) == ["sink"]
    assert fingerprint_change(base, fingerprint(_config(normalize={"outputs": "answer"}))) == ["normalize"]


def test_pacing_and_limits_do_not() -> None:
    base = fingerprint(_config())
    assert fingerprint_change(base, fingerprint(_config(judges={"j": {"model": "m1", "rpm": 5}}))) == []
    assert fingerprint_change(base, fingerprint(_config(limits={"batch_size": 7, "workers": 3}))) == []
    assert fingerprint_change(None, base) == ["(no fingerprint recorded)"]
