from __future__ import annotations

from pathlib import Path

import pytest

from assay.config import build_config, load_run_file, parse_evaluator_spec
from assay.exceptions import ConfigError

MINIMAL = """
source:
  path: in/{{ ds }}/*.jsonl
evaluators:
  - trajectory_match:mode=unordered
  - name: tool_use
    params: {expected_tool: submit}
sink:
  path: "out/{{ ds }}/"
"""


def test_load_templating_relative_paths_and_shorthand(tmp_path: Path) -> None:
    f = tmp_path / "run.yaml"
    f.write_text(MINIMAL)
    cfg = load_run_file(f, ds="2026-11-21")
    assert cfg.source.paths == [str(tmp_path / "in/2026-11-21/*.jsonl")]
    assert cfg.sink.path == str(tmp_path / "out/2026-11-21") + "/"
    assert cfg.evaluators[0].name == "trajectory_match"
    assert cfg.evaluators[0].params == {"mode": "unordered"}
    assert cfg.state_dir == str(tmp_path / ".assay")


def test_missing_ds_names_file_key_and_hint(tmp_path: Path) -> None:
    f = tmp_path / "run.yaml"
    f.write_text(MINIMAL)
    with pytest.raises(ConfigError, match=r"run\.yaml: source\.path: template variable .*ds.*--ds"):
        load_run_file(f)


def test_env_interpolation_and_default(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ASSAY_TEST_DIR", "/data")
    data = {
        "source": {"path": "${ASSAY_TEST_DIR}/x.jsonl"},
        "evaluators": ["trajectory_match"],
        "sink": {"path": "${ASSAY_TEST_OUT:-/tmp/out}/"},
    }
    cfg = build_config(data)
    assert cfg.source.paths == ["/data/x.jsonl"]
    assert cfg.sink.path == "/tmp/out/"
    monkeypatch.delenv("ASSAY_TEST_DIR")
    with pytest.raises(ConfigError, match=r"source\.path: environment variable ASSAY_TEST_DIR is not set"):
        build_config(data)


def test_set_overrides_nested_and_list_index() -> None:
    data = {"source": {"path": "a.jsonl"}, "evaluators": ["trajectory_match"], "sink": {"path": "o/"}}
    cfg = build_config(data, sets=["evaluators.0.params.mode=superset", "limits.batch_size=32"])
    assert cfg.evaluators[0].params == {"mode": "superset"}
    assert cfg.limits.batch_size == 32
    with pytest.raises(ConfigError, match="not an index"):
        build_config(data, sets=["evaluators.5.params.mode=x"])


def test_validation_error_names_origin_and_key() -> None:
    data = {
        "source": {"path": "a"},
        "evaluators": ["trajectory_match"],
        "sink": {"path": "o/"},
        "limits": {"batch_size": 0, "bogus": 1},
    }
    with pytest.raises(ConfigError) as info:
        build_config(data, origin="nightly.yaml")
    msg = str(info.value)
    assert "nightly.yaml: limits.batch_size" in msg
    assert "nightly.yaml: limits.bogus: Extra inputs are not permitted" in msg


def test_yaml_syntax_error_has_line(tmp_path: Path) -> None:
    f = tmp_path / "bad.yaml"
    f.write_text("source:\n  path: [a\nsink: x\n")
    with pytest.raises(ConfigError, match=r"bad\.yaml:\d+:\d+: invalid YAML"):
        load_run_file(f)


def test_evaluator_spec_parsing() -> None:
    spec = parse_evaluator_spec("trajectory_match:mode=strict,tool_args_match_overrides={search: ignore, q: [a, b]}")
    assert spec == {
        "name": "trajectory_match",
        "params": {"mode": "strict", "tool_args_match_overrides": {"search": "ignore", "q": ["a", "b"]}},
    }
    assert parse_evaluator_spec("exact_match") == {"name": "exact_match", "params": {}}
    with pytest.raises(ConfigError, match="expected key=value"):
        parse_evaluator_spec("trajectory_match:strict")


def test_shards_share_the_judge_limits_and_budget() -> None:
    from assay.pipeline.shard import share_limits

    data = {
        "source": {"path": "a.jsonl"},
        "evaluators": ["trajectory_match"],
        "sink": {"path": "o/"},
        "judges": {"j": {"provider": "openai", "model": "m", "rpm": 600, "tpm": 90000, "max_concurrency": 16}},
        "limits": {"budget_usd": 10},
    }
    shard = share_limits(build_config(data), 4)
    assert shard.judges["j"]["rpm"] == 150 and shard.judges["j"]["tpm"] == 22500
    assert shard.judges["j"]["max_concurrency"] == 4
    assert shard.limits.budget_usd == 2.5
    assert share_limits(build_config(data), 1).judges["j"]["rpm"] == 600


def test_rate_store_shares_every_judge_that_names_no_redis_of_its_own() -> None:
    from assay.pipeline.shard import share_limits

    data = {
        "source": {"path": "a.jsonl"},
        "rate_store": "redis://10.0.0.5:6379/1",
        "judges": {
            "j": {"model": "m", "rpm": 600},
            "own": {"model": "m", "rpm": 600, "shared_limit": "redis://other:6379/0"},
        },
        "evaluators": [
            {"name": "llm_judge", "params": {"prompt": "correctness", "judge": "j"}},
            {"name": "llm_judge", "params": {"prompt": "helpfulness", "judge": {"model": "m", "rpm": 60}}},
        ],
        "sink": {"path": "o/"},
    }
    cfg = build_config(data)
    assert cfg.judges["j"]["shared_limit"] == "redis://10.0.0.5:6379/1"
    assert cfg.judges["own"]["shared_limit"] == "redis://other:6379/0"
    assert cfg.evaluators[1].params["judge"]["shared_limit"] == "redis://10.0.0.5:6379/1"
    assert share_limits(cfg, 4).judges["j"]["rpm"] == 600  # one budget in Redis: not divided
    without = {k: v for k, v in data.items() if k != "rate_store"}
    assert "shared_limit" not in build_config(without).judges["j"]
    with pytest.raises(ConfigError, match=r"n.yaml: rate_store: .*redis://") as info:
        build_config({**data, "rate_store": "http://10.0.0.5:6379"}, origin="n.yaml")
    assert "shared_limit" not in str(info.value)
