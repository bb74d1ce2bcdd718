"""The TFLite converter's error, in one line an edgebench user can act on.

The MLIR converter's errors arrive as pages of "error:" and "note:" lines with compiler locations
(``loc(callsite(fused[...]))``) and its own advice for users of its API ("use Select TF ops", private
converter flags). A failed variant's row gets ``converter_reason``: the error lines without their
locations (the layer named instead), without that advice; a ``TensorListReserve`` error gets what an
edgebench user can do instead (``TENSORLIST_FIX``). The manifest keeps the whole text.
"""

from __future__ import annotations

import re

def _one_line(e: BaseException) -> str:
    """The converter's own reason in one line (see ``converter_reason``), else the first line."""
    reason = converter_reason(str(e))
    if reason:
        return reason
    lines = str(e).strip().splitlines()
    return (lines[0] if lines else type(e).__name__)[:300]


REASON_MAX = 400       # characters of the one-line reason; the whole text stays in ``error_detail``
TENSORLIST_FIX = ("a recurrent layer traced with a dynamic shape: fix every input dimension (--static-batch, "
                  "--input-shape NAME:1,...) so a Keras model is traced at them (edgebench converts to LiteRT "
                  "builtins only, no Select TF ops)")
_FUSED_NAME = re.compile(r'fused\["[^"]*",\s*"([^"@]+)')


def _drop_loc(text: str) -> tuple[str, str | None]:
    """'loc(callsite(fused["Op:", "model/layer@fn"] at ...)): reason' -> (reason, 'model/layer')."""
    if not text.startswith("loc("):
        return text, None
    depth = 0
    for i, ch in enumerate(text):
        depth += ch == "("
        depth -= ch == ")"
        if depth == 0 and ch == ")":
            m = _FUSED_NAME.search(text[:i])
            return text[i + 1:].lstrip(": ").strip(), (m.group(1) if m else None)
    return text, None


def converter_reason(text: str) -> str | None:
    """The MLIR converter's error lines without their compiler locations: "'tf.TensorListReserve'
    op requires element_shape to be static ... (at sequential/lstm/TensorArrayV2_1); ..."; None when
    the text has no "error:" line (not a converter error)."""
    reasons: list[str] = []
    for line in text.splitlines():
        _, sep, rest = line.partition("error: ")
        if not sep:
            continue
        reason, where = _drop_loc(rest.strip())
        reason = reason.replace("\\n", " ").strip()
        if where:
            reason = f"{reason} (at {where})"
        if reason and reason not in reasons:
            reasons.append(reason)
    if not reasons:
        return None
    # The converter's own advice (Select TF ops, private converter flags) is for its API's users; an
    # edgebench user can act on the input shapes instead.
    reasons = [r.split(" Please consider using Select TF ops")[0].strip() for r in reasons]
    tensorlist = next((r for r in reasons if "TensorList" in r and "element_shape" in r), None)
    if tensorlist is not None:     # the rest of its lines say the same ("failed to legalize", "Lowering ...")
        reasons = [tensorlist, TENSORLIST_FIX]
    one = "; ".join(reasons)
    return one if len(one) <= REASON_MAX else one[:REASON_MAX - 1] + "…"
