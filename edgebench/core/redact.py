"""Secrets in URL-like options (``--pushgateway``, ``--db``/``$EDGEBENCH_DB``, a remote adb server)
never reach a message, a suggested command, a progress line or a file edgebench writes.

``redact_url(url)`` is the form to show: the userinfo (``user:token@``) becomes ``***@``, a path
segment that looks like a credential (or follows one named like one: ``/token/<x>``) and the value
of a query parameter named like one (``?password=``, ``?sslkey=``) become ``***``. ``redact(text,
*urls)`` removes every secret of ``urls`` from any text -- a library's exception message, an HTTP
error body that echoes the path -- for messages built from text edgebench did not write.
"""

from __future__ import annotations

import re
import urllib.parse

MASK = "***"

# A path segment or query key that names a credential; the value after it is one.
_SECRET_NAME = re.compile(r"(token|secret|passw|pwd|api[-_]?key|apikey|auth|credential|signature|^sig$|"
                          r"session|bearer|^key$|sslkey|private)", re.IGNORECASE)
# A path segment that is itself a credential: 20+ URL-safe characters mixing letters and digits
# (API tokens, webhook secrets, JWTs), which plain prefixes (/pushgateway, /metrics) never are.
_SECRET_VALUE = re.compile(r"[A-Za-z0-9_\-.~+=]{20,}")


def _looks_secret(segment: str) -> bool:
    return (bool(_SECRET_VALUE.fullmatch(segment)) and any(c.isdigit() for c in segment)
            and any(c.isalpha() for c in segment))


def _split(url: str) -> urllib.parse.SplitResult | None:
    text = url.strip()
    if "://" not in text:
        if "@" not in text.split("/", 1)[0]:
            return None             # a plain path or host: nothing that can hold a credential
        text = "//" + text          # user:token@host:9091 given without a scheme
    try:
        return urllib.parse.urlsplit(text)
    except ValueError:
        return None


def secrets_of(url: str | None) -> list[str]:
    """The substrings of ``url`` that are secret, longest first (raw and percent-decoded forms)."""
    if not url:
        return []
    parts = _split(url)
    if parts is None:
        return []
    found: list[str] = []
    userinfo = parts.netloc.rpartition("@")[0] if "@" in parts.netloc else ""
    if userinfo:
        found.append(userinfo)
        user, _, password = userinfo.partition(":")
        if len(password) >= 3:
            found.append(password)
        if len(user) >= 8 or (user and not password):   # a bare user part is usually a token itself
            found.append(user)
    if not parts.scheme.startswith("sqlite"):         # a SQLite path is a file name, not a secret
        segments = [s for s in parts.path.split("/") if s]
        for i, seg in enumerate(segments):
            if _looks_secret(seg) or (i > 0 and _SECRET_NAME.search(segments[i - 1])):
                found.append(seg)
    for text in (parts.query, parts.fragment):
        for key, value in urllib.parse.parse_qsl(text, keep_blank_values=False):
            if value and (_SECRET_NAME.search(key) or _looks_secret(value)):
                found.append(value)
                found.append(urllib.parse.quote(value, safe=""))
    out = set()
    for s in found:
        out.add(s)
        out.add(urllib.parse.unquote(s))
    return sorted((s for s in out if len(s) >= 3), key=len, reverse=True)


def redact_url(url: str | None) -> str:
    """``url`` as edgebench shows it: every secret replaced by ``***`` (module docstring)."""
    if not url:
        return url or ""
    parts = _split(url)
    if parts is None:
        return url
    shown = url
    if "@" in parts.netloc:
        userinfo = parts.netloc.rpartition("@")[0]
        shown = shown.replace(userinfo + "@", MASK + "@", 1)
    for text in (parts.query, parts.fragment):
        if text:
            masked = "&".join(_mask_pair(pair) for pair in text.split("&"))
            shown = shown.replace(text, masked, 1)
    for secret in secrets_of(url):
        shown = shown.replace(secret, MASK)
    return shown


def _mask_pair(pair: str) -> str:
    key, sep, value = pair.partition("=")
    if sep and value and (_SECRET_NAME.search(urllib.parse.unquote(key)) or _looks_secret(value)):
        return f"{key}={MASK}"
    return pair


def redact(text: str, *urls: str | None) -> str:
    """``text`` with every secret of ``urls`` replaced by ``***``."""
    for url in urls:
        for secret in secrets_of(url):
            text = text.replace(secret, MASK)
    return text


__all__ = ["MASK", "redact", "redact_url", "secrets_of"]
