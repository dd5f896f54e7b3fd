"""An S3 source reports how much of its listing it has read (the progress ETA), against moto's
server: bytes of the objects' bodies as they are read, objects a resumed run skips counted as read."""

from __future__ import annotations

import gzip
from typing import Any

import anyio

from assay.connectors.s3 import S3Config, S3Source


def _objects(client: Any, bucket: str) -> int:
    total = 0
    for name, n in (("a.jsonl", 300), ("b.jsonl.gz", 500), ("c.jsonl", 200)):
        body = b"".join(b'{"id": "%s-%d", "messages": []}\n' % (name.encode(), i) for i in range(n))
        data = gzip.compress(body) if name.endswith(".gz") else body
        client.put_object(Bucket=bucket, Key=f"t/{name}", Body=data)
        total += len(data)
    return total


def test_size_done_follows_the_bytes_read(s3: S3Config, client: Any, bucket: str) -> None:
    total = _objects(client, bucket)
    seen: list[tuple[int, int | None]] = []

    async def main() -> None:
        src = S3Source(f"s3://{bucket}/t/", s3=s3, batch_size=50, max_concurrent_objects=1)
        assert src.size_done() is None  # not listed yet
        async with src:
            assert src.size_hint() == total and src.size_done() == 0
            async for batch in src.batches():
                seen.append((len(batch), src.size_done()))
            assert src.size_done() == total

    anyio.run(main)
    done = [d for _, d in seen]
    assert done == sorted(done) and 0 < done[0] < total  # grows as the objects are read


def test_objects_a_resumed_run_skips_count_as_read(s3: S3Config, client: Any, bucket: str) -> None:
    total = _objects(client, bucket)
    a_size = client.head_object(Bucket=bucket, Key="t/a.jsonl")["ContentLength"]
    state = {"done": {}, "complete": [f"s3://{bucket}/t/a.jsonl"]}

    async def main() -> tuple[int | None, int | None]:
        async with S3Source(f"s3://{bucket}/t/", s3=s3, resume_state=state) as src:
            before = src.size_done()
            async for _ in src.batches():
                pass
            return before, src.size_done()

    assert anyio.run(main) == (a_size, total)
