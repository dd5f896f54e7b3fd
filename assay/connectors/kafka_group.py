"""Leaving a consumer group on close, whatever generation the broker numbered the member's.

A member that closes sends ``LeaveGroup``, so the next consumer of the group id does not wait for
the old member's session to run out, and a run with ``assignment: manual`` may commit to the group
(a broker refuses a commit without a member id while the group has members). aiokafka (0.11-0.14,
``GroupCoordinator._maybe_leave_group``) sends it only when ``generation > 0``; the Java client
sends it whenever the member has an id. Apache Kafka's first generation is 1, but tansu (the broker
of the tests and benchmarks) numbers a new group's first generation **0**, so a single consumer of a
new group never left it. Measured on tansu 0.6.0 with a session timeout of 6 s: the same group id
joined again at once took 11.2 s instead of 3.0 s (the dead member was still the group's leader: the
new member's SyncGroup was held for 80 % of the session timeout, refused, and its second join held
again), and a later ``assignment: manual`` run's commits to that group were refused for good (tansu
evicts a silent member only when another one joins or heartbeats).

:func:`leave_from_any_generation` wraps the coordinator's leave step so a dynamic member with an
id leaves from generation 0 too; every other case is aiokafka's own code.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import Any

import anyio

__all__ = ["leave_from_any_generation"]

log = logging.getLogger(__name__)

LEAVE_TIMEOUT_S = 5.0
"""How long closing waits for the LeaveGroup answer (best effort, as aiokafka's own)."""


def leave_from_any_generation(consumer: Any, skip: Callable[[], bool] = lambda: False) -> bool:
    """Make ``consumer`` (a started ``AIOKafkaConsumer`` with a ``group_id``) send LeaveGroup
    when it stops as a member of generation 0. ``skip`` says the cluster is known to be gone
    (nothing is sent then). False when this aiokafka has no such step to wrap (a later release:
    its own leave then applies)."""
    coordinator = getattr(consumer, "_coordinator", None)
    original: Callable[[], Awaitable[None]] | None = getattr(coordinator, "_maybe_leave_group", None)
    if coordinator is None or original is None or not callable(getattr(coordinator, "_send_req", None)):
        return False
    from aiokafka.errors import KafkaError
    from aiokafka.protocol.group import JoinGroupRequest, LeaveGroupRequest

    async def leave() -> None:
        member = coordinator.member_id
        if (
            coordinator.generation != 0
            or coordinator._group_instance_id is not None  # a static member stays (KIP-345)
            or member == JoinGroupRequest.UNKNOWN_MEMBER_ID
        ):
            await original()
            return
        if not skip():
            try:
                with anyio.fail_after(LEAVE_TIMEOUT_S):
                    await coordinator._send_req(LeaveGroupRequest(coordinator.group_id, member))
            except (KafkaError, TimeoutError, OSError) as e:
                log.debug("kafka source: LeaveGroup of %s failed: %r", coordinator.group_id, e)
            else:
                log.debug("kafka source: left group %s (generation 0)", coordinator.group_id)
        coordinator.reset_generation()

    coordinator._maybe_leave_group = leave
    return True
