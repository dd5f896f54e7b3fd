"""Every run-file snippet in README.md and docs/ loads and validates as a user would paste it: the
```yaml blocks (a whole run file, a section, or a list of evaluators) and the inline `key: {…}`
spans. A fragment is completed into a minimal run file (a source, a sink, an evaluator, the judges
it names); then the file is read by the run-file loader and its evaluators are built, as
``assay validate`` does."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from assay.config import load_run_file, load_yaml
from assay.pipeline.assembly import build_evaluators

ROOT = Path(__file__).resolve().parents[2]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
TOP_KEYS = (
    "source|sink|dead_letter|evaluators|judges|limits|gates|stats|calibration|normalize|s3|state_dir|rate_store|"
    "summary_path|run_id|ds"
)
BLOCK = re.compile(r"^```(\w*)\n(.*?)^```", re.M | re.S)
INLINE = re.compile(rf"`((?:{TOP_KEYS}):\s*\{{[^`]*\}})`")


def snippets() -> Iterator[Any]:
    for doc in DOCS:
        text = doc.read_text(encoding="utf-8")
        for m in BLOCK.finditer(text):
            lang, body = m.group(1), m.group(2)
            looks_like_run_file = re.search(rf"^\s*-?\s*(?:{TOP_KEYS}|name)\s*:", body, re.M)
            if lang == "yaml" or (lang == "" and looks_like_run_file and _is_yaml_mapping(body)):
                line = text[: m.start()].count("\n") + 2
                yield pytest.param(body, id=f"{doc.name}:{line}")
        for m in INLINE.finditer(text):
            if _is_schema_sketch(m.group(1)):
                continue  # `calibration: {n, agreement, …}`: what a summary holds, not a run file
            line = text[: m.start()].count("\n") + 1
            yield pytest.param(m.group(1), id=f"{doc.name}:{line}:inline")


def _is_yaml_mapping(body: str) -> bool:
    try:
        return isinstance(load_yaml(body), dict | list)
    except yaml.YAMLError:
        return False


def _is_schema_sketch(text: str) -> bool:
    def nulls(v: Any) -> bool:
        return v is None or (isinstance(v, dict) and any(nulls(x) for x in v.values()))

    return nulls(load_yaml(text))


def _judge_names(evaluators: list[Any]) -> set[str]:
    names: set[str] = set()
    for ev in evaluators:
        params = ev.get("params", {}) if isinstance(ev, dict) else {}
        if isinstance(params.get("judge"), str):
            names.add(params["judge"])
        names.update(j for j in params.get("judges", []) if isinstance(j, str))
    return names


def complete(data: Any) -> dict[str, Any]:
    """A snippet made a whole run file: what it leaves out gets a minimal default."""
    if isinstance(data, list):  # a list of evaluators (indented under `evaluators:` in the docs)
        data = {"evaluators": data}
    assert isinstance(data, dict), f"a run-file snippet is a mapping or a list of evaluators, got {data!r}"
    run: dict[str, Any] = {"source": {"path": "traces.jsonl"}, "sink": {"path": "out/"}, **data}
    evaluators = run.setdefault("evaluators", ["exact_match"])
    judges = dict(run.get("judges") or {})
    for name in _judge_names(evaluators if isinstance(evaluators, list) else []) - set(judges):
        judges[name] = {"provider": "openai", "model": "gpt-4.1-mini"}
    if not judges:  # the one judge every judge evaluator that names none uses
        judges["grader"] = {"provider": "openai", "model": "gpt-4.1-mini"}
    run["judges"] = judges
    for key in run.get("gates") or {}:  # a gate names a key an evaluator produces
        run["evaluators"] = [*evaluators, {"name": "exact_match", "params": {"key": key}}]
    return run


@pytest.mark.parametrize("text", list(snippets()))
def test_a_documented_run_file_snippet_loads_and_validates(
    text: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    data = load_yaml(text)
    if isinstance(data, dict):
        assert all(isinstance(k, str) for k in data), data  # a bare `on:` / `yes:` key stays a word
    run = complete(data)
    f = tmp_path / "run.yaml"
    # the snippet's own text as the user wrote it, under what completes it
    rest = {k: v for k, v in run.items() if not isinstance(data, dict) or k not in data}
    if isinstance(data, list):
        rest.pop("evaluators")
        body = "evaluators:\n" + "\n".join("  " + line for line in text.splitlines())
    else:
        body = text
    f.write_text((yaml.safe_dump(rest) if rest else "") + body)
    (tmp_path / "my_evals.py").write_text("def no_apologies(outputs, strict=False, **kw):\n    return True\n")
    (tmp_path / "labels.csv").write_text("trace_id,key,label\n")
    monkeypatch.syspath_prepend(str(tmp_path))  # `my_evals` of the docs' user function
    config = load_run_file(f, ds="2026-11-21")
    build_evaluators(config, str(f))


def test_the_snippets_are_found() -> None:
    ids = [p.id for p in snippets()]  # type: ignore[attr-defined]
    assert len(ids) >= 15, ids
    assert any("statistics.md" in i and "inline" in i for i in ids)  # the interval gate `on: lower_bound`


def test_a_bare_on_key_is_a_word_and_values_still_read_as_before() -> None:
    data = load_yaml("gates: {k: {min_pass_rate: {value: 0.9, on: lower_bound}}}\nflag: yes\nyes: no\n")
    assert data == {"gates": {"k": {"min_pass_rate": {"value": 0.9, "on": "lower_bound"}}}, "flag": True, "yes": False}
