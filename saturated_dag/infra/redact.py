"""Credentials kept out of every file and log line the project writes.

Why: a setting may hold a URI with a password in it (``tracking.tracking_uri:
postgresql://user:secret@host/db``, an MLflow server's ``http://user:secret@host``), and the
settings are written to ``<output_dir>/settings.json``, to warnings and to error messages. Every
writer shows a setting through ``redact_uri`` (one value), ``redacted`` (a whole settings
mapping) or ``redact_text`` (a message that may quote one, such as a library's error), so the
password is written ``user:***@host`` everywhere; the real value still goes, unchanged, to the
client that needs it (MLflow's). Better still, keep it out of the profile altogether: MLflow
reads ``MLFLOW_TRACKING_USERNAME`` / ``MLFLOW_TRACKING_PASSWORD`` from the environment, and
libpq ``PGPASSWORD`` (``docs/reliability.md``).

Pure text: no Dagster, no MLflow; a value that is not a URI is returned as it is.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

HIDDEN = "***"

_USERINFO = re.compile(
    r"(?P<head>\b[A-Za-z][A-Za-z0-9+.\-]*://[^\s:/?#@]*):(?P<password>\S+?)@"
    r"(?=[^\s@/?#]*(?:[/?#\s'\"]|$))")
"""``scheme://user:password@host``. The user is SQLAlchemy's (no ``:`` nor ``/``); the
password runs to the ``@`` whose host that follows holds no other ``@``, so a raw ``@`` inside
the password (meant as ``%40``) is hidden too, not left after the first one. A ``host:port/x@y``
with no user at all may be taken for one and hidden: shown less, never leaked."""

_QUERY = re.compile(r"(?P<key>[?&;](?:password|passwd|pwd|token|access_token|api_key|secret)=)"
                    r"[^&#\s'\"]*", re.IGNORECASE)
"""A credential given as a query parameter (libpq's ``?password=``, a server's ``?token=``)."""


def redact_uri(value: str) -> str:
    """``value`` with the password of any URI in it replaced by ``***`` (``user:***@host``); a
    URI with a user and no password, and anything that is not a URI, are returned as they
    are. Also used on free text (``redact_text``): it finds every URI in it."""
    shown = _USERINFO.sub(lambda m: f"{m['head']}:{HIDDEN}@", value)
    return _QUERY.sub(lambda m: f"{m['key']}{HIDDEN}", shown)


redact_text = redact_uri
"""A message (a library's error, a log line) with every URI's password hidden: the same rule,
named for what the caller holds."""


def redacted(settings: Any) -> Any:
    """``settings`` (a profile's dump: nested mappings, lists, scalars) as a new structure with
    every string through ``redact_uri``: any setting that holds a URI, whatever its name
    (``tracking.tracking_uri``, a model or data source given as a URL), is shown without its
    password. Keys and non-string values are kept."""
    if isinstance(settings, str):
        return redact_uri(settings)
    if isinstance(settings, Mapping):
        return {key: redacted(value) for key, value in settings.items()}
    if isinstance(settings, (list, tuple)):
        return type(settings)(redacted(value) for value in settings)
    return settings
