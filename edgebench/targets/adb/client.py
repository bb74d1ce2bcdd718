"""The adb server connection: an adbutils client on $ANDROID_ADB_SERVER_PORT, the errors it
raises, the device states ``adb devices`` lists and the fix for each unusable state."""

from __future__ import annotations

import os

from edgebench.core.errors import InfraError
from edgebench.core.redact import redact, redact_url

DEFAULT_SERVER_PORT = 5037


def _client():
    """An adbutils client for the server at $ANDROID_ADB_SERVER_PORT (read now, not at import)."""
    from adbutils import AdbClient

    port = int(os.environ.get("ANDROID_ADB_SERVER_PORT", DEFAULT_SERVER_PORT))
    host = os.environ.get("ANDROID_ADB_SERVER_HOST", "127.0.0.1")
    return AdbClient(host=host, port=port, socket_timeout=20)


def _describe(exc: BaseException) -> str:
    return str(exc) or type(exc).__name__


def _adb_errors() -> tuple[type[BaseException], ...]:
    from adbutils import AdbError

    return (AdbError, EOFError, OSError)


def list_states() -> list[tuple[str, str]]:
    """[(serial, state)] as ``adb devices`` shows them (starts the adb server if needed)."""
    try:
        return [(d.serial, d.state) for d in _client().list()]
    except _adb_errors() as exc:
        port = os.environ.get("ANDROID_ADB_SERVER_PORT", DEFAULT_SERVER_PORT)
        host = os.environ.get("ANDROID_ADB_SERVER_HOST")     # a remote server: shown with secrets masked
        where = f"{redact_url(host)}:{port}" if host else f"port {port}"
        raise InfraError(f"cannot reach or start the adb server on {where} ({redact(str(exc), host)}); install "
                         "adb (apt-get install adb / Android platform-tools) and run 'adb start-server'") from None


def _state_fix(serial: str, state: str) -> str:
    if state == "unauthorized":
        return (f"adb device {serial} is unauthorized: unlock it and accept 'Allow USB debugging?' "
                "(or revoke USB debugging authorizations, replug and accept), then rerun")
    if state == "offline":
        return (f"adb device {serial} is offline: replug it or run 'adb reconnect offline' (for a network "
                f"device 'adb disconnect {serial} && adb connect {serial}'), then rerun")
    return f"adb device {serial} is in state {state!r}, not 'device'; reboot it into Android, then rerun"
