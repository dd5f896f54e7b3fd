"""Facts about this process and others on this machine."""

from __future__ import annotations

import os
import uuid

INVOCATION_ID = uuid.uuid4().hex[:12]
"""This process's own id: the invocation of ``assay`` (its summary records it beside the run id,
which is stable across reruns)."""


def pid_alive(pid: int) -> bool:
    """Whether a process with this pid exists on this machine (one of another user counts).

    >>> pid_alive(os.getpid())
    True
    """
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
