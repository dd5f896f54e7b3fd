"""Loading user code named ``"module:attr"`` in a run file (user evaluators, extractors, matchers)."""

from __future__ import annotations

import importlib
import os
import sys
from collections.abc import Callable
from typing import Any

from assay.exceptions import ConfigError


def load_callable(target: str, what: str = "") -> Callable[..., Any]:
    """Import ``"module:function"`` (dotted attributes allowed: ``"module:Class.method"``).

    Modules are looked up on ``sys.path`` and then in the current directory, so a run file can name
    a module that sits next to where ``assay`` is run. Errors are ConfigErrors naming ``what``.
    """
    prefix = f"{what}: " if what else ""
    module_name, sep, attr = target.partition(":")
    if not sep or not module_name or not attr:
        raise ConfigError(f"{prefix}expected 'module:function', got {target!r}")
    try:
        obj: Any = _import(module_name)
        for part in attr.split("."):
            obj = getattr(obj, part)
    except (ImportError, AttributeError) as exc:
        raise ConfigError(f"{prefix}cannot load {target!r}: {exc}") from exc
    if not callable(obj):
        raise ConfigError(f"{prefix}{target!r} is not callable")
    return obj  # type: ignore[no-any-return]


def _import(module_name: str) -> Any:
    try:
        return importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        cwd = os.getcwd()
        top = module_name.split(".", 1)[0]
        if exc.name != top or cwd in sys.path:
            raise
        sys.path.append(cwd)
        return importlib.import_module(module_name)
