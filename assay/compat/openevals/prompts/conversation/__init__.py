"""``from openevals.prompts.conversation import …`` (see :mod:`assay.compat.openevals.prompts`)."""

from __future__ import annotations

from assay.compat.openevals.prompts.conversation.agent_tone import AGENT_TONE_PROMPT
from assay.compat.openevals.prompts.conversation.knowledge_retention import KNOWLEDGE_RETENTION_PROMPT
from assay.compat.openevals.prompts.conversation.language_detection import LANGUAGE_DETECTION_PROMPT
from assay.compat.openevals.prompts.conversation.perceived_error import PERCEIVED_ERROR_PROMPT
from assay.compat.openevals.prompts.conversation.support_intent import SUPPORT_INTENT_PROMPT
from assay.compat.openevals.prompts.conversation.task_completion import TASK_COMPLETION_PROMPT
from assay.compat.openevals.prompts.conversation.user_satisfaction import USER_SATISFACTION_PROMPT
from assay.compat.openevals.prompts.conversation.wins import WINS_PROMPT

__all__ = [
    "AGENT_TONE_PROMPT",
    "KNOWLEDGE_RETENTION_PROMPT",
    "LANGUAGE_DETECTION_PROMPT",
    "PERCEIVED_ERROR_PROMPT",
    "SUPPORT_INTENT_PROMPT",
    "TASK_COMPLETION_PROMPT",
    "USER_SATISFACTION_PROMPT",
    "WINS_PROMPT",
]
