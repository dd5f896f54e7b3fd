"""``from openevals.prompts.voice import …`` (see :mod:`assay.compat.openevals.prompts`)."""

from __future__ import annotations

from assay.compat.openevals.prompts.voice.audio_quality import AUDIO_QUALITY_PROMPT
from assay.compat.openevals.prompts.voice.transcription_accuracy import TRANSCRIPTION_ACCURACY_PROMPT
from assay.compat.openevals.prompts.voice.user_interrupts import USER_INTERRUPTS_PROMPT
from assay.compat.openevals.prompts.voice.vocal_affect import VOCAL_AFFECT_PROMPT

__all__ = [
    "AUDIO_QUALITY_PROMPT",
    "TRANSCRIPTION_ACCURACY_PROMPT",
    "USER_INTERRUPTS_PROMPT",
    "VOCAL_AFFECT_PROMPT",
]
