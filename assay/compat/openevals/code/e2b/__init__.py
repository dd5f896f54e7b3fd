"""``openevals.code.e2b`` without E2B (see :mod:`assay.compat`): ``.execution`` runs the code in
assay's local sandbox (``code_execution``); ``.pyright`` type-checks locally. An E2B ``Sandbox``
object (or :class:`assay.compat.e2b_code_interpreter.Sandbox`) is accepted and ignored, with a
one-time note; the generated code's dependencies are not installed."""

from __future__ import annotations

import logging
from typing import Any

_noted = False


def ignore_sandbox(sandbox: Any) -> None:
    """Accept an E2B sandbox argument; say once per process that it is not used."""
    global _noted
    if sandbox is not None and not _noted:
        _noted = True
        logging.getLogger("assay.compat").warning(
            "assay.compat: the E2B sandbox %s is not used: the code runs in assay's local sandbox, "
            "and its dependencies are not installed",
            type(sandbox).__name__,
        )
