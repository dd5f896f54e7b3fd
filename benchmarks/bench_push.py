"""How close a push gets to a platform's published limit, and how fast it pushes when there is none.

1. LangSmith: N results to the strict LangSmith stand-in limited to RPM feedback requests per minute
   (a sliding one-second window of RPM/60, 429 with Retry-After above it; the stand-in serves on
   its own thread and event loop, as a platform would elsewhere), at the target's default
   rpm (the published 5,000/min): achieved rate / limit (the issue asks >= 90 %). 100,000 results
   at 5,000/min take 20 minutes by the limit: the default N=5,000 takes one.
2. Unlimited: N results to the OTLP receiver and the Langfuse stand-in with no limit (items/s).
3. Phoenix (``--phoenix``, needs ``pip install arize-phoenix``): a real ``phoenix serve`` in a temp
   dir, N root spans loaded through the OpenTelemetry SDK, then N span annotations pushed (items/s).

    python benchmarks/bench_push.py --phoenix [N]

    python benchmarks/bench_push.py [N] [RPM]
"""

from __future__ import annotations

import datetime as dt
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

import anyio

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from assay.push import PushLedger, build_target, push_target  # noqa: E402
from assay.testing.langfuse_server import LangfuseServerThread  # noqa: E402
from assay.testing.langsmith_server import LangSmithServerThread  # noqa: E402
from assay.testing.otlp_receiver import OtlpReceiverThread  # noqa: E402

DAY = dt.datetime(2026, 11, 20, tzinfo=dt.UTC)
EXTRA: dict[str, Any] = {}


def rows(n: int) -> list[dict[str, Any]]:
    """n results: one per row (a result key, an identity, a score)."""
    return [
        {
            "trace_id": uuid.uuid4().hex,
            "results": {"quality": {"key": "quality", "score": 1.0, "value": True, "comment": "ok"}},
            "identity": {"quality": "contains/0123456789/-/-"},
        }
        for _ in range(n)
    ]


def limited(n: int, rpm: float) -> None:
    data = rows(n)
    with LangSmithServerThread(api_key="k", rpm=rpm) as s, tempfile.TemporaryDirectory() as state:
        target = build_target({"type": "langsmith", "api_url": s.url, **EXTRA}, env={"LANGSMITH_API_KEY": "k"})
        started = time.monotonic()
        report = anyio.run(push_target, target, lambda: iter(data), PushLedger(state), DAY)
        wall = time.monotonic() - started
        stats = s.server.stats
    achieved = report.delivered / wall * 60
    print(
        f"langsmith: {report.delivered}/{n} delivered in {wall:.1f} s = {achieved:,.0f}/min against a "
        f"{rpm:,.0f}/min limit: {achieved / rpm:.1%} of the limit; 429s {report.rate_limited_429}, "
        f"duplicates {stats.duplicates}, requests {report.requests}"
    )


def unlimited(n: int) -> None:
    data = rows(n)
    lf_env = {"LANGFUSE_PUBLIC_KEY": "pk-test", "LANGFUSE_SECRET_KEY": "sk-test"}
    for kind, thread, spec, env in (
        ("otel", OtlpReceiverThread, {"type": "otel"}, {}),
        ("langfuse", LangfuseServerThread, {"type": "langfuse", "rpm": 1e9}, lf_env),
    ):
        with thread() as s, tempfile.TemporaryDirectory() as state:
            key = "endpoint" if kind == "otel" else "host"
            target = build_target({**spec, key: s.url}, env=env)
            started = time.monotonic()
            report = anyio.run(push_target, target, lambda: iter(data), PushLedger(state), DAY)
            wall = time.monotonic() - started
        print(f"{kind} (no limit): {report.delivered} in {wall:.2f} s = {report.delivered / wall:,.0f} items/s")


def phoenix(n: int) -> None:
    import os
    import shutil
    import signal
    import subprocess

    from tests.support.phoenix_fixtures import Phoenix, _free_port

    exe = shutil.which("phoenix")
    if exe is None:
        raise SystemExit("arize-phoenix is not installed")
    with tempfile.TemporaryDirectory() as work, tempfile.TemporaryDirectory() as state:
        port, grpc = _free_port(), _free_port()
        env = {**os.environ, "PHOENIX_WORKING_DIR": work, "PHOENIX_HOST": "127.0.0.1", "PHOENIX_PORT": str(port),
               "PHOENIX_GRPC_PORT": str(grpc)}  # fmt: skip
        proc = subprocess.Popen([exe, "serve"], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                start_new_session=True)  # fmt: skip
        try:
            server = Phoenix(f"http://127.0.0.1:{port}")
            while True:
                try:
                    server.get("/v1/projects")
                    break
                except OSError:
                    time.sleep(0.5)
            traces = [(uuid.uuid4().hex, f"{i + 1:016x}") for i in range(n)]
            server.load_traces("bench", traces)
            data = [
                {**r, "trace_id": t, "platform": {"trace_id": t, "root_id": s}}
                for r, (t, s) in zip(rows(n), traces, strict=True)
            ]
            target = build_target({"type": "phoenix", "endpoint": server.url})
            started = time.monotonic()
            report = anyio.run(push_target, target, lambda: iter(data), PushLedger(state), DAY)
            wall = time.monotonic() - started
            print(f"phoenix (real server, no limit): {report.delivered}/{n} in {wall:.2f} s = "
                  f"{report.delivered / wall:,.0f} annotations/s, rejected {report.rejected}")  # fmt: skip
        finally:
            os.killpg(proc.pid, signal.SIGTERM)
            proc.wait(timeout=30)


def main() -> None:
    if sys.argv[1:2] == ["--phoenix"]:
        phoenix(int(sys.argv[2]) if len(sys.argv) > 2 else 2000)
        return
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 5000
    rpm = float(sys.argv[2]) if len(sys.argv) > 2 else 5000.0
    limited(n, rpm)
    unlimited(max(n, 20000))


if __name__ == "__main__":
    main()
