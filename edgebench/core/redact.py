"""Secrets in URL-like options (``--pushgateway``, ``--db``/``$EDGEBENCH_DB``, a remote adb server)
never reach a message, a suggested command, a progress line or a file edgebench writes.

``redact_url(url)`` is the form to show: the userinfo (``user:token@``) becomes ``***@``, a path
segment that looks like a credential (or follows one named like one: ``/token/<x>``) and the value
of a query parameter named like one (``?password=``, ``?sslkey=``) become ``***``. ``redact(text,
*urls)`` removes every secret of ``urls`` from any text -- a library's exception message, an HTTP
error body that echoes the path -- for messages built from text edgebench did not write.

A URL that cannot be parsed (``urllib.parse.urlsplit`` refuses it, its port is not a number from 0
to 65535, or the caller's own parser -- SQLAlchemy's ``make_url`` -- refused it: ``parsed=False``)
is shown as its scheme and ``://***``: where its parts are is unknown, so everything after the
scheme may be a password. A ``#fragment`` is never needed to reach a server and is always
``#***``.
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


_SCHEME = re.compile(r"[A-Za-z][A-Za-z0-9+.\-]*")
_UNPARSED = object()


def _split(url: str) -> urllib.parse.SplitResult | None | object:
    """The parts of ``url``; None for a plain path or host (nothing that can hold a credential);
    ``_UNPARSED`` for a URL whose parts cannot be told apart."""
    text = url.strip()
    if "://" not in text and "@" in text and re.match(r"[A-Za-z][A-Za-z0-9+.\-]*:/", text):
        return _UNPARSED            # postgresql:/user:pw@host/db -- a URL with a slash missing
    if "://" not in text:
        if "@" not in text.split("/", 1)[0]:
            return None             # a plain path or host: nothing that can hold a credential
        text = "//" + text          # user:token@host:9091 given without a scheme
    try:
        parts = urllib.parse.urlsplit(text)
        parts.port                  # noqa: B018 -- ValueError for a port that is not 0..65535
    except ValueError:
        return _UNPARSED
    if "://" in url and not _SCHEME.fullmatch(url.strip().split("://", 1)[0]):
        return _UNPARSED
    return parts


def _masked_whole(url: str) -> str:
    """``scheme://***`` (``***`` when even the scheme is not one): an unparseable URL as shown."""
    head, sep, _rest = url.strip().partition("://")
    if sep:
        return f"{head}://{MASK}" if _SCHEME.fullmatch(head) else MASK
    head, sep, _rest = url.strip().partition(":")
    return f"{head}:{MASK}" if sep and _SCHEME.fullmatch(head) else MASK


def _unparsed_secrets(url: str) -> list[str]:
    """What may be secret in a URL that cannot be parsed: everything after the scheme, and the
    pieces a library's message may quote alone (the userinfo, its password, the fragment)."""
    text = url.strip()
    rest = text.split("://", 1)[1] if "://" in text else text
    if "://" not in text and re.match(r"[A-Za-z][A-Za-z0-9+.\-]*:/", text):
        rest = text.split(":", 1)[1]
    found = [rest]
    netloc = rest.split("/", 1)[0]
    if "@" in rest:
        userinfo = rest.rpartition("@")[0] if "@" in netloc else netloc.rpartition("@")[0] or rest.rpartition("@")[0]
        found.append(userinfo)
        user, _, password = userinfo.partition(":")
        found += [password, user] if len(user) >= 8 else [password]
    if "#" in rest:
        found.append(rest.split("#", 1)[1])
    for key, value in urllib.parse.parse_qsl(rest.partition("?")[2].partition("#")[0]):
        if value and (_SECRET_NAME.search(key) or _looks_secret(value)):
            found.append(value)
    return found


def secrets_of(url: str | None, *, parsed: bool = True) -> list[str]:
    """The substrings of ``url`` that are secret, longest first (raw and percent-decoded forms);
    ``parsed=False`` as for :func:`redact_url`."""
    if not url:
        return []
    parts = _split(url)
    if parts is None and parsed:
        return []
    found: list[str] = []
    if parts is _UNPARSED or not parsed:
        found = _unparsed_secrets(url)
        return sorted({x for s in found for x in (s, urllib.parse.unquote(s)) if len(x) >= 3}, key=len, reverse=True)
    if parts.fragment and not parts.scheme.startswith("sqlite"):
        found.append(parts.fragment)
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


def redact_url(url: str | None, *, parsed: bool = True) -> str:
    """``url`` as edgebench shows it: every secret replaced by ``***`` (module docstring).
    ``parsed=False``: the caller's parser refused ``url`` (SQLAlchemy's ``ArgumentError``), so all of
    it after the scheme is masked."""
    if not url:
        return url or ""
    parts = _split(url)
    if parts is None and parsed:
        return url
    if parts is _UNPARSED or not parsed:
        return _masked_whole(url)
    shown = url
    if parts.fragment and not parts.scheme.startswith("sqlite"):   # a SQLite file name may hold a '#'
        shown = shown.partition("#")[0] + "#" + MASK
    if "@" in parts.netloc:
        userinfo = parts.netloc.rpartition("@")[0]
        shown = shown.replace(userinfo + "@", MASK + "@", 1)
    if parts.query:
        masked = "&".join(_mask_pair(pair) for pair in parts.query.split("&"))
        shown = shown.replace("?" + parts.query, "?" + masked, 1)
    for secret in secrets_of(url):
        shown = shown.replace(secret, MASK)
    return shown


def _mask_pair(pair: str) -> str:
    key, sep, value = pair.partition("=")
    if sep and value and (_SECRET_NAME.search(urllib.parse.unquote(key)) or _looks_secret(value)):
        return f"{key}={MASK}"
    return pair


def redact(text: str, *urls: str | None, parsed: bool = True) -> str:
    """``text`` with every secret of ``urls`` replaced by ``***`` (all of an unparseable URL after its
    scheme; ``parsed=False`` as for :func:`redact_url`)."""
    for url in urls:
        for secret in secrets_of(url, parsed=parsed):
            text = text.replace(secret, MASK)
    return text


__all__ = ["MASK", "redact", "redact_url", "secrets_of"]
