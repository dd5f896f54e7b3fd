"""URL checks the run file's models and the judges share: a Redis URL (``rate_store``, a judge's
``shared_limit``).

>>> redis_url("redis://localhost:6379/0")
'redis://localhost:6379/0'
>>> redis_url("http://localhost:6379")
Traceback (most recent call last):
...
ValueError: expected a redis:// (or rediss://, unix://) URL
"""

from __future__ import annotations

#: The schemes a Redis URL starts with.
REDIS_SCHEMES = ("redis://", "rediss://", "unix://")


def redis_url(v: str | None) -> str | None:
    """A ``shared_limit`` or ``rate_store`` value: a Redis URL, or None."""
    if v is not None and not v.startswith(REDIS_SCHEMES):
        raise ValueError("expected a redis:// (or rediss://, unix://) URL")
    return v
