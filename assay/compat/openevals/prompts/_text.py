"""The text of a prebuilt prompt of assay's library, as openevals' constants hold theirs."""

from __future__ import annotations

from assay.judges.prompts import get_prompt


def prompt_text(name: str) -> str:
    """The template of prebuilt prompt ``name`` (an f-string style template)."""
    return get_prompt(name).template
