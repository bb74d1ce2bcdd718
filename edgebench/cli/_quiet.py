"""Filter TensorFlow/LiteRT C++ start-up chatter from the CLI's stderr.

TensorFlow >= 2.16 logs through absl *before* ``TF_CPP_MIN_LOG_LEVEL`` is honoured, so its
oneDNN/CUDA-stub/cpu-feature lines cannot be silenced by environment variables. The CLI routes
file descriptor 2 through a pipe and drops only lines in that exact log format; everything
else (our errors, warnings, rich output, Python tracebacks) passes through unchanged.
``EDGEBENCH_DEBUG=1`` disables the filter.
"""

from __future__ import annotations

import os
import re
import sys
import threading

NOISE = re.compile(
    rb"^(?:[IWE]\d{4} [\d:. ]+\s+\d+ [\w./-]+:\d+\]"          # absl: I0000 00:00:... 123 port.cc:153]
    rb"|WARNING: All log messages before absl::InitializeLog"
    rb"|To enable the following instructions: .* rebuild TensorFlow"
    rb"|fully_quantize: \d, inference_type"                      # TFLite converter calibration banner
    rb"|INFO: Created TensorFlow Lite XNNPACK delegate for CPU"
    rb"|WARNING:absl:"
    # the MLIR converter's raw diagnostics: the row's error carries their reason in one line
    # (convert.converter_reason) and the JSON the whole text
    rb"|loc\(.*\): (?:error|note|warning): "
    rb"|<unknown>:\d+: (?:error|note|warning): "
    rb"|error: Lowering tensor list ops is failed"
    rb")"
)


_ACTIVE: "StderrFilter | None" = None


def original_stderr_fd() -> int | None:
    """The user's real stderr (a dup) while the filter is active, else None."""
    return None if _ACTIVE is None else _ACTIVE._saved


class StderrFilter:
    def __init__(self) -> None:
        self._saved: int | None = None
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        if os.environ.get("EDGEBENCH_DEBUG"):
            return
        try:
            sys.stderr.flush()
            r, w = os.pipe()
            self._saved = os.dup(2)
            os.dup2(w, 2)
            os.close(w)
        except OSError:
            self._saved = None
            return
        saved = self._saved
        global _ACTIVE
        _ACTIVE = self

        def pump() -> None:
            buf = b""
            with os.fdopen(r, "rb", buffering=0) as src:
                while True:
                    chunk = src.read(65536)
                    if not chunk:
                        break
                    buf += chunk
                    *lines, buf = buf.split(b"\n")
                    out = b"".join(line + b"\n" for line in lines if not NOISE.match(line))
                    if out:
                        os.write(saved, out)
            if buf and not NOISE.match(buf):
                os.write(saved, buf)

        self._thread = threading.Thread(target=pump, name="edgebench-stderr", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        global _ACTIVE
        if self._saved is None:
            return
        _ACTIVE = None
        try:
            sys.stderr.flush()
        except Exception:  # noqa: BLE001
            pass
        os.dup2(self._saved, 2)   # closes our write end: the pump sees EOF once children exit
        if self._thread is not None:
            self._thread.join(timeout=2.0)
        os.close(self._saved)
        self._saved = None
