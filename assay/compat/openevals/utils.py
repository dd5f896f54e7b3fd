"""Helpers of ``openevals.utils`` that users' code imports (see :mod:`assay.compat`).

``_attachment_to_content_block``: one attachment (openevals' multimodal trace format
``{"mime_type", "data"}``, an image URL, or a content block already) as an OpenAI content block,
with openevals' errors (``ValueError``).

>>> _attachment_to_content_block({"mime_type": "audio/mpeg", "data": "data:audio/mpeg;base64,SUQz"})
{'type': 'input_audio', 'input_audio': {'data': 'SUQz', 'format': 'mp3'}}
"""

from __future__ import annotations

from typing import Any

from assay.evaluators.judge_render import attachment_block
from assay.exceptions import EvaluatorError

_SUPPORTED = ("image/", "audio/", "application/pdf")


def _attachment_to_content_block(item: Any) -> dict[str, Any]:
    """An attachment as a content block (``image_url``, ``file`` or ``input_audio``)."""
    if isinstance(item, str):
        return {"type": "image_url", "image_url": {"url": item}}
    if not isinstance(item, dict):
        raise ValueError(
            f"Unsupported attachment type: {type(item)}. "
            "Expected a string URL or a dict with 'mime_type' and 'data' keys."
        )
    if item.get("mime_type") is None or item.get("data") is None:
        if "type" not in item:
            raise ValueError(
                "Attachment dict must contain either 'mime_type' and 'data' keys, "
                "or a 'type' key for pre-formatted content blocks."
            )
        return item
    mime = str(item["mime_type"]).lower().strip()
    if not mime.startswith(_SUPPORTED):
        raise ValueError(
            f"Unsupported attachment MIME type: {mime}. Supported types: image/*, application/pdf, audio/*"
        )
    spec = {"mime_type": mime, "data": item["data"], "filename": item.get("name")}
    try:
        block = attachment_block(spec)
    except EvaluatorError as exc:
        raise ValueError(str(exc)) from None
    if block.get("type") == "image_url":  # the data as given (openevals does not build a data URL)
        block = {"type": "image_url", "image_url": {"url": item["data"]}}
    elif block.get("type") == "file":
        block["file"]["file_data"] = item["data"]
    return block


__all__ = ["_attachment_to_content_block"]
