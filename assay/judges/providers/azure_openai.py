"""``provider: azure_openai``: Azure OpenAI deployments.

``POST {base_url}/openai/deployments/{deployment}/chat/completions?api-version={api_version}``
with the key in the ``api-key`` header (from ``AZURE_OPENAI_API_KEY``); the body and the reply
are OpenAI's chat completions (structured output through ``response_format``). ``base_url`` is
the resource root (``https://NAME.openai.azure.com``, default from ``AZURE_OPENAI_ENDPOINT``);
``deployment`` defaults to ``model``; ``api_version`` to ``2024-10-21`` (GA, with structured
outputs). A ``base_url`` that already names a deployment (``.../openai/deployments/NAME``, the
form ``provider: openai`` takes) is used as it is. An Entra ID token instead of a key:
``api_key_header: Authorization`` with the token in ``api_key_env``.

>>> from assay.judges.config import JudgeConfig
>>> cfg = JudgeConfig(provider="azure_openai", model="gpt-4o", base_url="https://r.openai.azure.com")
>>> AzureOpenAIProvider(cfg).url()
'https://r.openai.azure.com/openai/deployments/gpt-4o/chat/completions?api-version=2024-10-21'
"""

from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar
from urllib.parse import quote

from assay.exceptions import ConfigError
from assay.judges.config import JudgeConfig
from assay.judges.providers.openai import OpenAIProvider

if TYPE_CHECKING:
    from assay.judges.batch.api import BatchAPI
    from assay.judges.guard import Secrets

DEFAULT_AZURE_API_VERSION = "2024-10-21"


class AzureOpenAIProvider(OpenAIProvider):
    name = "azure_openai"
    default_base_url: ClassVar[str | None] = None
    base_url_env = "AZURE_OPENAI_ENDPOINT"
    key_envs: ClassVar[tuple[str, ...]] = ("AZURE_OPENAI_API_KEY",)
    key_header = "api-key"
    batch_limits: ClassVar[tuple[int, int] | None] = (100_000, 200_000_000)

    def batcher(self, name: str, api_key: str | None, secrets: Secrets | None = None) -> BatchAPI:
        from assay.judges.batch.api import AzureOpenAIBatches

        return AzureOpenAIBatches(
            name, self, api_key, secrets, api_version=self.config.api_version or DEFAULT_AZURE_API_VERSION
        )

    @classmethod
    def base_url_for(cls, config: JudgeConfig) -> str:
        url = config.base_url or cls.base_url_from_env()
        if not url:
            raise ConfigError(
                "provider azure_openai needs base_url (https://NAME.openai.azure.com) or AZURE_OPENAI_ENDPOINT"
            )
        return url

    def url(self) -> str:
        base = self.base_url()
        if "/openai/deployments/" not in base:
            base += f"/openai/deployments/{quote(self.config.deployment or self.config.model, safe='')}"
        return f"{base}/chat/completions?api-version={self.config.api_version or DEFAULT_AZURE_API_VERSION}"
