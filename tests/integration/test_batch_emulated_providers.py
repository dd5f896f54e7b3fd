"""Issue 18's batch-mode check against an endpoint that is not the project's stand-in: the
independent emulator of :mod:`tests.support.provider_batch` (delays, per-line 500/429 failures, a
few requests that always fail, part of the batches expiring, shuffled output, an enqueued-token
limit below the night's total, polls answered 500), driven by real ``python -m assay.cli run``
processes repeated until exit 0, killed with SIGKILL at seeded moments: while submitting, between
the upload and the create, right after a batch was created (before assay recorded it), while
collecting (half-way through a result download), during a real-time fallback call, while scoring,
and at random times.

The whole-night version: ``ASSAY_EMU_TRACES=12000 python -m pytest
tests/integration/test_batch_emulated_providers.py -k until_exit_0 -s``.
"""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from tests.support.provider_batch import Faults, ProviderBatchEmulator

N_TRACES = int(os.environ.get("ASSAY_EMU_TRACES", "800"))
PRICE_IN, PRICE_OUT = 1.0, 2.0
MAX_ATTEMPTS = 3
NEW_USER = os.environ.get("ASSAY_EMU_NEW_USER") == "1"
"""The night's run file as a new user writes it: no ``batch:`` settings at all (the providers' own
batch sizes, no ``max_enqueued_tokens``)."""
DUPLICATE_EVERY = 97
"""Every 97th trace asks the judge the same question as the trace before it (same custom_id)."""


def night_faults(seed: int, n_traces: int = N_TRACES) -> Faults:
    # about 170 tokens a request on the emulator's count: the limit holds a quarter of the night
    return Faults(
        delay=(0.3, 1.5),
        line_500=0.04,
        line_429=0.02,
        always_fail=0.004,
        expire_batches=0.25,
        poll_500=0.01,
        enqueued_token_limit=max(20_000, n_traces * 170 // 4),
        seed=seed,
    )


@pytest.fixture
def emulator(request: pytest.FixtureRequest) -> Iterator[ProviderBatchEmulator]:
    faults = getattr(request, "param", None) or night_faults(seed=21)
    emu = ProviderBatchEmulator(faults).start()
    request.addfinalizer(emu.stop)
    yield emu


def write_corpus(path: Path, n: int = N_TRACES) -> None:
    with path.open("w") as f:
        for i in range(n):
            q = i - 1 if i % DUPLICATE_EVERY == DUPLICATE_EVERY - 1 else i
            rec = {
                "id": f"t{i}",
                "inputs": f"question {q}",
                "outputs": f"answer {q}",
                "reference_outputs": f"answer {q}",
            }
            f.write(json.dumps(rec) + "\n")


def write_run(folder: Path, url: str, provider: str, *, sample: float | None = None, **batch: Any) -> Path:
    evaluator: dict[str, Any] = {"name": "llm_judge", "params": {"prompt": "correctness", "judge": "gpt"}}
    if sample is not None:
        evaluator["sample"] = {"rate": sample}
    cfg = {
        "source": {"path": "corpus.jsonl"},
        "judges": {
            "gpt": {
                "provider": provider,
                "base_url": f"{url}/v1",
                "model": "judge-1",
                "mode": "batch",
                "input_price_per_mtok": PRICE_IN,
                "output_price_per_mtok": PRICE_OUT,
                "batch": {} if NEW_USER and not batch else {"max_requests": 200, "poll_interval_s": 0.2, **batch},
            }
        },
        "evaluators": [evaluator],
        "sink": {"path": "out/"},
    }
    run = folder / "run.yaml"
    run.write_text(json.dumps(cfg))
    return run


def env(emu: ProviderBatchEmulator) -> dict[str, str]:
    return {**os.environ, "OPENAI_API_KEY": emu.openai_key, "ANTHROPIC_API_KEY": emu.anthropic_key}


@dataclass
class Night:
    """The invocations of one night: exit codes and where each was killed."""

    codes: list[int] = field(default_factory=list)
    kills: list[str] = field(default_factory=list)
    wall_s: float = 0.0


KILL_EVENTS = ("upload", "create", "results", "poll", "realtime")


def _plan(rng: random.Random, provider: str) -> tuple[str, Any, float | None]:
    """(kind, argument, delay of a kill once rows are being written or None)."""
    scoring = rng.uniform(0.0, 0.3) if rng.random() < 0.5 else None
    roll = rng.random()
    if roll < 0.35:
        return ("none", None, scoring)
    if roll < 0.8:
        events = [e for e in KILL_EVENTS if not (provider == "anthropic" and e == "upload")]
        return ("event", (rng.choice(events), rng.randint(1, 3)), scoring)
    return ("timed", rng.uniform(0.05, 2.5), None)


def invoke(
    emu: ProviderBatchEmulator,
    run: Path,
    folder: Path,
    plan: tuple[str, Any, float | None],
    extra: tuple[str, ...] = (),
) -> tuple[int, str, str]:
    """One ``assay run`` (its exit code, -9 when killed; where it was killed; its stderr)."""
    started = time.time()
    proc = subprocess.Popen(
        [sys.executable, "-m", "assay.cli", "run", str(run), "-q", *extra],
        cwd=folder,
        env=env(emu),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert proc.stderr is not None
    stderr: list[str] = []
    reader = threading.Thread(target=lambda: stderr.append(proc.stderr.read()), daemon=True)  # type: ignore[union-attr]
    reader.start()  # (a full pipe would stall the process while this thread watches it)
    killed_at: list[str] = []
    lock = threading.Lock()

    def kill(where: str) -> bool:
        with lock:
            if killed_at or proc.poll() is not None:
                return False
            proc.kill()
            killed_at.append(where)
            return True

    kind, arg, scoring = plan
    if kind == "event":
        event, nth = arg
        seen = [0]

        def hook(name: str, info: dict[str, Any]) -> bool:
            if name != event:
                return False
            seen[0] += 1
            return seen[0] == nth and kill(name)

        emu.hook = hook
    try:
        if kind == "timed":
            try:
                proc.wait(timeout=arg)
            except subprocess.TimeoutExpired:
                kill("timed")
        elif scoring is not None:
            while proc.poll() is None:  # rows being written: the scoring run
                if any(_newer(p, started) for p in (folder / "out").glob("**/part-*")):
                    time.sleep(scoring)
                    kill("scoring")
                    break
                time.sleep(0.01)
        proc.wait(timeout=600)
        reader.join(60)
    finally:
        emu.hook = None
    return proc.returncode, (killed_at[0] if killed_at else ""), "".join(stderr)


def _newer(path: Path, t: float) -> bool:
    try:
        return path.stat().st_mtime >= t
    except FileNotFoundError:  # renamed away meanwhile
        return False


def until_exit_0(
    emu: ProviderBatchEmulator,
    run: Path,
    folder: Path,
    *,
    seed: int,
    provider: str,
    extra: tuple[str, ...] = (),
    max_invocations: int = 150,
    kills: bool = True,
) -> Night:
    rng = random.Random(seed)
    night = Night()
    t0 = time.monotonic()
    for _ in range(max_invocations):
        plan = _plan(rng, provider) if kills else ("none", None, None)
        code, where, err = invoke(emu, run, folder, plan, extra)
        night.codes.append(code)
        if where:
            night.kills.append(where)
        if code == 0:
            night.wall_s = time.monotonic() - t0
            return night
        assert code in (75, -9), f"exit {code} after {night.codes[:-1]}:\n{err[-3000:]}"
        if rng.random() < 0.3:
            time.sleep(rng.uniform(0.0, 0.5))  # between invocations: the batches go on
    raise AssertionError(f"no exit 0 after {max_invocations} invocations: {night.codes}")


def rows(out: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for p in sorted(out.glob("part-*.jsonl")) for line in p.read_text().splitlines()]


def check_night(folder: Path, emu: ProviderBatchEmulator, n_traces: int = N_TRACES) -> dict[str, Any]:
    out = folder / "out"
    got = rows(out)
    assert (out / "_SUCCESS").exists()
    ids = [r["trace_id"] for r in got]
    assert len(ids) == len(set(ids)) == n_traces  # exactly one row per trace
    assert set(ids) == {f"t{i}" for i in range(n_traces)}
    results = [r["results"]["correctness"] for r in got]
    bad = [r for r in results if r.get("error") is not None or r.get("score") is None]
    assert not bad, bad[:3]  # every judge result a score
    seen = emu.seen
    assert seen.rejected_batches == []  # nothing assay sent broke the providers' rules
    assert seen.unauthorized == 0
    distinct = n_traces - n_traces // DUPLICATE_EVERY
    assert len(seen.fates) == distinct  # one custom_id per distinct request
    assert seen.submitted_again_after_success() == []  # only failed or expired lines went again
    for cid, fates in seen.fates.items():
        assert len([f for f in fates if f != "refused"]) <= MAX_ATTEMPTS, (cid, fates)
    exhausted = seen.exhausted(MAX_ATTEMPTS)
    assert exhausted  # some lines used up their attempts (the fallback was exercised)
    called = {cid for cid, *_ in seen.realtime}
    assert called == exhausted  # a real-time call only for a line that exhausted its attempts
    answered = {cid for cid, _, _, delivered in seen.realtime if delivered}
    assert answered == exhausted
    # the bill: batch lines at half price, the fallback calls at full price
    batch_in = sum(t[0] for t in seen.billed.values())
    batch_out = sum(t[1] for t in seen.billed.values())
    batch_cost = (batch_in * PRICE_IN + batch_out * PRICE_OUT) / 1e6 * 0.5
    summary = json.loads((out / "_SUMMARY.json").read_text())
    totals = summary["totals"]
    assert summary["status"] == "ok"
    assert totals["batch"]["lines"] == len(seen.billed) == distinct - len(exhausted)
    assert totals["batch"]["input_tokens"] == batch_in and totals["batch"]["output_tokens"] == batch_out
    assert totals["batch"]["cost_usd"] == pytest.approx(batch_cost)
    # real time: every answer the run used was paid and is counted; a call whose answer a killed
    # process may or may not have read before it died may be counted or not (it was paid)
    used = {cid: (tin, tout) for cid, tin, tout, delivered in seen.realtime if delivered}
    least = sum(tin * PRICE_IN + tout * PRICE_OUT for tin, tout in used.values()) / 1e6
    most = sum(tin * PRICE_IN + tout * PRICE_OUT for _, tin, tout, _ in seen.realtime) / 1e6
    rt_cost = totals["realtime"]["cost_usd"]
    assert least - 1e-9 <= rt_cost <= most + 1e-9
    assert sum(t[0] for t in used.values()) <= totals["realtime"]["input_tokens"]
    assert totals["cost_usd"] == pytest.approx(batch_cost + rt_cost)
    return summary


def report(provider: str, night: Night, emu: ProviderBatchEmulator, summary: dict[str, Any]) -> str:
    seen = emu.seen
    paid: Counter[int] = Counter()
    for fates in seen.fates.values():
        paid[len([f for f in fates if f != "refused"])] += 1
    refused = sum(f.count("refused") for f in seen.fates.values())
    totals = summary["totals"]
    full = sum(tin * PRICE_IN + tout * PRICE_OUT for tin, tout in seen.billed.values()) / 1e6
    full += sum(tin * PRICE_IN + tout * PRICE_OUT for _, tin, tout, ok in seen.realtime if ok) / 1e6
    return (
        f"{N_TRACES} traces, {provider}: {len(night.codes)} invocations, {len(night.kills)} kills "
        f"({', '.join(f'{k} {v}' for k, v in sorted(Counter(night.kills).items()))}), "
        f"exit codes {dict(sorted(Counter(night.codes).items()))}, rows {len(rows(Path(summary['output_dir'])))}, "
        f"batches {seen.batches_created} ({seen.refused_creates} refused for the enqueued-token limit, "
        f"{refused} line submissions refused), submissions per custom_id (refusals not counted) "
        f"{dict(sorted(paid.items()))}, real-time calls {len(seen.realtime)} for {len(seen.exhausted(MAX_ATTEMPTS))} "
        f"exhausted lines, cost ${totals['cost_usd']:.4f} (batch ${totals['batch']['cost_usd']:.4f}, "
        f"real time ${totals['realtime']['cost_usd']:.4f}; all at the real-time price ${full:.4f}), "
        f"wall {night.wall_s:.0f} s"
    )


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
def test_until_exit_0_with_kill_9_between_and_during_invocations(
    tmp_path: Path, emulator: ProviderBatchEmulator, provider: str
) -> None:
    write_corpus(tmp_path / "corpus.jsonl")
    run = write_run(tmp_path, emulator.url, provider)
    night = until_exit_0(emulator, run, tmp_path, seed=5, provider=provider)
    assert night.codes[-1] == 0 and 75 in night.codes and -9 in night.codes
    assert emulator.seen.refused_creates > 0  # the enqueued-token limit was met, and waited out
    assert any("expired" in f for f in emulator.seen.fates.values())
    summary = check_night(tmp_path, emulator)
    print(report(provider, night, emulator, {**summary, "output_dir": str(tmp_path / "out")}))
    # the same command once more: everything is cached, nothing is sent
    before = sum(emulator.seen.submissions.values()), len(emulator.seen.realtime)
    code, _, err = invoke(emulator, run, tmp_path, ("none", None, None))
    assert code == 0, err
    assert (sum(emulator.seen.submissions.values()), len(emulator.seen.realtime)) == before
    again = json.loads((tmp_path / "out" / "_SUMMARY.json").read_text())
    assert again["totals"]["cost_usd"] == pytest.approx(summary["totals"]["cost_usd"])


@pytest.mark.parametrize(
    "emulator", [Faults(delay=(0.1, 0.3), always_fail=1.0, seed=3)], indirect=True, ids=["every-line-fails"]
)
def test_fallback_calls_of_an_invocation_killed_while_collecting_are_in_the_totals(
    tmp_path: Path, emulator: ProviderBatchEmulator
) -> None:
    """kill -9 during the collect pass's real-time fallback calls: the calls already answered were
    paid (and are cached, so they are not made again): the summary counts them."""
    write_corpus(tmp_path / "corpus.jsonl", 200)
    run = write_run(tmp_path, emulator.url, "openai", max_attempts=1)
    codes = []
    for plan in [("none", None, None), ("event", ("realtime", 60), None), ("none", None, None), ("none", None, None)]:
        code, _, err = invoke(emulator, run, tmp_path, plan)  # type: ignore[arg-type]
        time.sleep(0.5)  # the batches end: the next invocation collects them and calls in real time
        codes.append(code)
        if code == 0:
            break
        assert code in (75, -9), err
    assert codes[-1] == 0 and -9 in codes, codes
    seen = emulator.seen
    delivered = [(cid, tin, tout) for cid, tin, tout, ok in seen.realtime if ok]
    used = {cid: (tin, tout) for cid, tin, tout in delivered}  # one answer per request
    # the calls answered while the process was being killed (not cached yet) are made again
    assert len(used) == 198 and len(delivered) >= 198
    totals = json.loads((tmp_path / "out" / "_SUMMARY.json").read_text())["totals"]
    counted = totals["realtime"]["input_tokens"]
    needed = sum(t[0] for t in used.values())
    print(f"real-time calls answered {len(delivered)}, tokens of the {len(used)} used {needed}, counted {counted}")
    assert counted >= needed  # every answer the run uses was counted
    assert counted <= sum(t[1] for t in delivered)
    least = sum(tin * PRICE_IN + tout * PRICE_OUT for tin, tout in used.values()) / 1e6
    assert totals["realtime"]["cost_usd"] >= least - 1e-9


def sampled_ids(out: Path) -> set[str]:
    got = rows(out)
    assert len(got) == len({r["trace_id"] for r in got})  # one row per trace
    picked = {r["trace_id"] for r in got if "correctness" in r["results"]}
    results = [r["results"]["correctness"] for r in got if r["trace_id"] in picked]
    assert all(r.get("error") is None and r.get("score") is not None for r in results)
    return picked


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
def test_a_2_percent_sample_picks_the_same_traces_across_reruns_and_workers(tmp_path: Path, provider: str) -> None:
    n = int(os.environ.get("ASSAY_EMU_SAMPLE_TRACES", "1500"))
    picked: dict[str, set[str]] = {}
    for workers in ("1", "2"):
        folder = tmp_path / f"workers-{workers}"
        folder.mkdir()
        write_corpus(folder / "corpus.jsonl", n)
        with ProviderBatchEmulator(night_faults(seed=31, n_traces=200)) as emu:
            run = write_run(folder, emu.url, provider, sample=0.02, max_requests=20)
            extra = ("--workers", workers)
            night = until_exit_0(emu, run, folder, seed=17, provider=provider, extra=extra)
            print(f"--workers {workers}: {len(night.codes)} invocations, kills {night.kills}")
            assert len(rows(folder / "out")) == n and (folder / "out" / "_SUCCESS").exists()
            picked[workers] = sampled_ids(folder / "out")
            seen = emu.seen
            assert seen.submitted_again_after_success() == [] and seen.rejected_batches == []
            # only the sample was sent: one custom_id per sampled trace (duplicates share one)
            assert 0 < len(seen.fates) <= len(picked[workers])
            code, _, err = invoke(emu, run, folder, ("none", None, None), extra)  # the same command again
            assert code == 0, err
            assert sampled_ids(folder / "out") == picked[workers]
    print(f"{n} traces, {provider}: the 2 % sample holds {len(picked['1'])} traces, the same with --workers 1 and 2")
    assert picked["1"] == picked["2"]
    assert 0.01 * n < len(picked["1"]) < 0.03 * n


def test_an_unrecorded_anthropic_batch_is_found_behind_a_page_of_newer_batches(tmp_path: Path) -> None:
    """kill -9 right after Anthropic created the batch (before assay recorded it), then other jobs of
    the workspace create 120 batches: the next invocation still finds ours (it pages through the
    listing) and pays nothing twice."""
    import urllib.request

    with ProviderBatchEmulator(Faults(delay=(1.5, 1.5), seed=4)) as emu:
        write_corpus(tmp_path / "corpus.jsonl", 60)
        run = write_run(tmp_path, emu.url, "anthropic", max_requests=1000)
        code, where, _ = invoke(emu, run, tmp_path, ("event", ("create", 1), None))
        assert (code, where) == (-9, "create")
        for i in range(120):  # another job's batches, newer than ours
            line = {"custom_id": f"other-{i}", "params": {"model": "m", "max_tokens": 5, "messages": []}}
            req = urllib.request.Request(
                f"{emu.url}/v1/messages/batches",
                data=json.dumps({"requests": [line]}).encode(),
                headers={"x-api-key": emu.anthropic_key, "anthropic-version": "2023-06-01"},
                method="POST",
            )
            urllib.request.urlopen(req).close()
        for _ in range(10):
            code, _, err = invoke(emu, run, tmp_path, ("none", None, None))
            if code == 0:
                break
            assert code == 75, err
            time.sleep(0.5)
        assert code == 0
        ours = {cid: f for cid, f in emu.seen.fates.items() if not cid.startswith("other-")}
        assert len(ours) == 60 - 60 // DUPLICATE_EVERY
        assert all(f == ["ok"] for f in ours.values()), ours  # submitted once, collected once


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
def test_invalid_lines_are_error_results_with_the_providers_message_and_a_bad_key_exits_2(
    tmp_path: Path, provider: str
) -> None:
    write_corpus(tmp_path / "corpus.jsonl", 200)
    with ProviderBatchEmulator(Faults(delay=(0.1, 0.3), invalid=0.05, line_500=0.05, seed=8)) as emu:
        run = write_run(tmp_path, emu.url, provider)
        bad = subprocess.run(
            [sys.executable, "-m", "assay.cli", "run", str(run), "-q"],
            cwd=tmp_path,
            env={
                **env(emu),
                "OPENAI_API_KEY": "sk-wrong-key-0123456789",
                "ANTHROPIC_API_KEY": "sk-wrong-key-0123456789",
            },
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert bad.returncode == 2, bad.stderr
        assert "401" in bad.stderr and "sk-wrong-key-0123456789" not in bad.stderr
        assert emu.seen.batches_created == 0 and emu.seen.fates == {}
        no_cache = subprocess.run(
            [sys.executable, "-m", "assay.cli", "run", str(run), "-q", "--no-cache"],
            cwd=tmp_path,
            env=env(emu),
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert no_cache.returncode == 2 and "--no-cache" in no_cache.stderr
        night = until_exit_0(emu, run, tmp_path, seed=1, provider=provider, max_invocations=40)
        assert night.codes[-1] == 0
        invalid = {cid for cid, f in emu.seen.fates.items() if "invalid" in f}
        assert invalid and all(emu.seen.fates[cid] in (["invalid"], ["refused", "invalid"]) for cid in invalid)
        errors = [r["results"]["correctness"]["error"] for r in rows(tmp_path / "out")]
        with_error = [e for e in errors if e]
        assert with_error and all("emulator:" in e for e in with_error)  # the provider's own message
        assert len(with_error) >= len(invalid)
        assert {cid for cid, *_ in emu.seen.realtime} == emu.seen.exhausted(MAX_ATTEMPTS)


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
def test_the_same_request_of_several_traces_gets_one_fallback_call_counted_once(tmp_path: Path, provider: str) -> None:
    with (tmp_path / "corpus.jsonl").open("w") as f:
        for i in range(150):  # 50 questions, each asked by three traces
            q = i % 50
            rec = {"id": f"t{i}", "inputs": f"q {q}", "outputs": f"a {q}", "reference_outputs": f"a {q}"}
            f.write(json.dumps(rec) + "\n")
    with ProviderBatchEmulator(Faults(delay=(0.1, 0.2), always_fail=1.0, seed=2)) as emu:
        run = write_run(tmp_path, emu.url, provider, max_attempts=1)
        night = until_exit_0(emu, run, tmp_path, seed=0, provider=provider, max_invocations=20, kills=False)
        assert night.codes[-1] == 0
        seen = emu.seen
        assert len(seen.fates) == 50 and all(f == ["error500"] for f in seen.fates.values())
        assert len(seen.realtime) == 50  # one call per request, not per trace
        totals = json.loads((tmp_path / "out" / "_SUMMARY.json").read_text())["totals"]
        assert totals["realtime"]["input_tokens"] == sum(tin for _, tin, _, _ in seen.realtime)
        cost = sum(tin * PRICE_IN + tout * PRICE_OUT for _, tin, tout, _ in seen.realtime) / 1e6
        assert totals["realtime"]["cost_usd"] == pytest.approx(cost)
        assert all(r["results"]["correctness"]["error"] is None for r in rows(tmp_path / "out"))


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
def test_a_create_answered_500_is_pending_and_a_batch_made_all_the_same_is_not_paid_twice(
    tmp_path: Path, provider: str
) -> None:
    write_corpus(tmp_path / "corpus.jsonl", 600)
    with ProviderBatchEmulator(Faults(delay=(0.2, 0.6), create_500=0.3, seed=6)) as emu:
        run = write_run(tmp_path, emu.url, provider, max_requests=50)
        night = until_exit_0(emu, run, tmp_path, seed=2, provider=provider, max_invocations=40, kills=False)
        assert set(night.codes) <= {75, 0}  # an unknown outcome is pending, not a failed run
        assert emu.seen.create_errors > 0
        assert emu.seen.submitted_again_after_success() == []
        assert all(len(f) == 1 for f in emu.seen.fates.values())  # every line paid once
        assert len(rows(tmp_path / "out")) == 600


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
def test_wait_polls_through_the_night_in_one_invocation(
    tmp_path: Path, emulator: ProviderBatchEmulator, provider: str
) -> None:
    write_corpus(tmp_path / "corpus.jsonl")
    run = write_run(tmp_path, emulator.url, provider)
    code, _, err = invoke(emulator, run, tmp_path, ("none", None, None), ("--wait",))
    assert code == 0, err[-3000:]
    assert emulator.seen.refused_creates > 0
    check_night(tmp_path, emulator)


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
def test_result_downloads_cut_half_way_are_read_again(tmp_path: Path, provider: str) -> None:
    write_corpus(tmp_path / "corpus.jsonl", 400)
    # 4 batches; the first 20 downloads fail (each batch's 5 tries in the invocation that collects
    # them: they stay open, the run is pending), then one in five
    faults = Faults(delay=(0.1, 0.3), drop_first_downloads=20, download_drop=0.2, line_500=0.1, seed=9)
    with ProviderBatchEmulator(faults) as emu:
        run = write_run(tmp_path, emu.url, provider, max_requests=100)
        assert invoke(emu, run, tmp_path, ("none", None, None))[0] == 75  # submitted
        time.sleep(0.5)
        night = until_exit_0(emu, run, tmp_path, seed=3, provider=provider, max_invocations=40, kills=False)
        assert set(night.codes) <= {75, 0}
        assert night.codes[0] == 75  # every download of the round failed: pending, not failed
        assert emu.seen.dropped_downloads >= 20
        assert emu.seen.submitted_again_after_success() == []
        assert len(rows(tmp_path / "out")) == 400


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
def test_an_unrecorded_batch_is_looked_for_again_when_the_listing_is_down(tmp_path: Path, provider: str) -> None:
    """kill -9 right after the create, then the listing answers 500 to every try of the next
    invocation: it is pending (not failed, and the lines are not put back: the batch exists), and
    the one after finds the batch; every line paid once."""
    write_corpus(tmp_path / "corpus.jsonl", 100)
    with ProviderBatchEmulator(Faults(delay=(0.2, 0.4), fail_first_lists=5, seed=5)) as emu:
        run = write_run(tmp_path, emu.url, provider, max_requests=1000)
        assert invoke(emu, run, tmp_path, ("event", ("create", 1), None))[:2] == (-9, "create")
        code, _, err = invoke(emu, run, tmp_path, ("none", None, None))
        assert code == 75, err[-2000:]
        assert "looked for again" in err
        night = until_exit_0(emu, run, tmp_path, seed=0, provider=provider, max_invocations=10, kills=False)
        assert night.codes[-1] == 0
        assert emu.seen.batches_created == 1
        assert all(f == ["ok"] for f in emu.seen.fates.values())
        assert len(rows(tmp_path / "out")) == 100


def test_the_official_sdks_read_the_emulator() -> None:
    """The emulator's wire shapes are the SDKs' own: openai 3.x and anthropic 2.x drive it end to end
    (upload, create, retrieve, list with pagination, results), their models validating every answer."""
    import anthropic
    import openai

    with ProviderBatchEmulator(Faults(delay=(0.2, 0.2), line_500=0.3, seed=1)) as emu:
        oa = openai.OpenAI(api_key=emu.openai_key, base_url=f"{emu.url}/v1", max_retries=0)
        body = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}
        lines = [
            {"custom_id": f"r{i}", "method": "POST", "url": "/v1/chat/completions", "body": body} for i in range(6)
        ]
        data = "".join(json.dumps(x) + "\n" for x in lines).encode()
        created = []
        for _ in range(3):
            f = oa.files.create(file=("in.jsonl", data), purpose="batch")
            created.append(
                oa.batches.create(
                    input_file_id=f.id,
                    endpoint="/v1/chat/completions",
                    completion_window="24h",
                    metadata={"k": "v"},
                )
            )
        assert created[0].status == "validating" and created[0].metadata == {"k": "v"}
        page = oa.batches.list(limit=2)
        assert [b.id for b in page.data] == [created[2].id, created[1].id] and page.has_more
        assert [b.id for b in page.get_next_page().data] == [created[0].id]
        time.sleep(0.3)
        done = oa.batches.retrieve(created[0].id)
        assert done.status == "completed" and done.request_counts is not None
        assert done.request_counts.total == 6 and done.request_counts.completed + done.request_counts.failed == 6
        out = [json.loads(x) for x in oa.files.content(done.output_file_id or "").text.splitlines()]
        assert all(x["response"]["status_code"] == 200 for x in out)
        answer = openai.types.chat.ChatCompletion.model_validate(out[0]["response"]["body"])
        assert answer.usage is not None and answer.usage.prompt_tokens > 0
        with pytest.raises(openai.AuthenticationError):
            openai.OpenAI(api_key="sk-wrong", base_url=f"{emu.url}/v1", max_retries=0).batches.list()

        an = anthropic.Anthropic(api_key=emu.anthropic_key, base_url=emu.url, max_retries=0)
        params = {"model": "m", "max_tokens": 5, "messages": [{"role": "user", "content": "hi"}]}
        batches = [
            an.messages.batches.create(requests=[{"custom_id": f"a{j}-{i}", "params": params} for i in range(4)])  # type: ignore[misc]
            for j in range(3)
        ]
        assert batches[0].processing_status == "in_progress" and batches[0].request_counts.processing == 4
        listed = an.messages.batches.list(limit=2)
        assert [b.id for b in listed.data] == [batches[2].id, batches[1].id] and listed.has_more
        assert [b.id for b in listed.get_next_page().data] == [batches[0].id]
        time.sleep(0.3)
        ended = an.messages.batches.retrieve(batches[0].id)
        assert ended.processing_status == "ended" and ended.ended_at is not None and ended.results_url
        results = list(an.messages.batches.results(batches[0].id))
        assert sorted(r.custom_id for r in results) == [f"a0-{i}" for i in range(4)]
        assert {r.result.type for r in results} <= {"succeeded", "errored"}
        with pytest.raises(anthropic.BadRequestError):
            an.messages.batches.create(requests=[{"custom_id": "no spaces allowed", "params": params}])  # type: ignore[misc]
