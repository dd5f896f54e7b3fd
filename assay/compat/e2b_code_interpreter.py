"""``from e2b_code_interpreter import Sandbox`` → ``from assay.compat.e2b_code_interpreter import Sandbox``.

assay runs generated code in its own local sandbox (``code_execution``: new namespaces, no
network, a scrubbed environment), not in E2B's cloud: this ``Sandbox`` is an inert stand-in so
openevals' E2B examples run with only their import lines changed. The code's dependencies are
**not** installed (E2B's sandbox installs the imports it detects; here an import of a package this
interpreter lacks fails the execution).
"""

from __future__ import annotations

from typing import Any


class Sandbox:
    """Accepts E2B's arguments (``template``, ``api_key`` …) and ignores them."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self.template = args[0] if args else kwargs.get("template")

    def kill(self) -> None:
        """Nothing to stop: no remote sandbox was started."""

    def __enter__(self) -> Sandbox:
        return self

    def __exit__(self, *exc: object) -> None:
        self.kill()


__all__ = ["Sandbox"]
