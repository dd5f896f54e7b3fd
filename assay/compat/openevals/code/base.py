"""Helpers of ``openevals.code.base`` that users' code imports (see :mod:`assay.compat`).

``_extract_code_from_markdown_code_blocks``: the code of a text's fenced blocks (fences at
column 0; blocks tagged bash, sh, shell, zsh, fish, console, terminal or json skipped), joined,
or ``None`` without any; the rule assay's code evaluators use.

>>> _extract_code_from_markdown_code_blocks("Run:\\n```python\\nprint(1)\\n```\\n```bash\\nls\\n```")
'print(1)\\n'
"""

from __future__ import annotations

from assay.evaluators.code import extract_markdown_code

#: Seconds a pyright / mypy check may take through the compat face: openevals sets no limit, and
#: mypy over code importing a large library (FastAPI) takes tens of seconds on a busy machine.
COMPAT_CHECK_TIMEOUT = 600.0

#: openevals' extraction strategies; any other value is treated as ``"none"``, as openevals does.
STRATEGIES = ("none", "llm", "markdown_code_blocks")


def _extract_code_from_markdown_code_blocks(text: str) -> str | None:
    """The code of ``text``'s fenced blocks, or ``None``."""
    return extract_markdown_code(text)


def extraction_strategy(strategy: object, code_extractor: object) -> str:
    """openevals' ``code_extraction_strategy`` argument as assay's ``code_extraction``: an
    unknown value is ``"none"``; a ``code_extractor`` with another strategy is a ``ValueError``."""
    if code_extractor is not None and strategy != "none":
        raise ValueError("`code_extraction_strategy` cannot be set if `code_extractor` is provided")
    return str(strategy) if strategy in STRATEGIES else "none"


__all__ = ["_extract_code_from_markdown_code_blocks", "extraction_strategy"]
