"""The Kafka sink's murmur2 is the Java client's (and aiokafka's): keyed rows land where every
other client puts the same key."""

from __future__ import annotations

import random

from aiokafka.partitioner import murmur2 as aiokafka_murmur2

from assay.connectors.kafka_sink import murmur2


def test_murmur2_equals_aiokafka_on_random_keys() -> None:
    rnd = random.Random(31)
    keys = [b"", b"a", b"ab", b"abc", b"abcd", "trace-é-ü-🙂".encode()]
    keys += [rnd.randbytes(rnd.randrange(0, 80)) for _ in range(20_000)]
    keys += [f"trace-0-{i:08d}".encode() for i in range(2_000)]
    for key in keys:
        assert murmur2(key) == aiokafka_murmur2(key), key


def test_murmur2_known_values() -> None:
    # the Java client's Utils.murmur2 of these keys (the value before the positive mask)
    assert murmur2(b"21") == 3321034988
    assert murmur2(b"") == 275646681
