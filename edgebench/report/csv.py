"""CSV of stored result rows (headline columns), for spreadsheets and scripts (pure)."""

from __future__ import annotations

import csv
import io
from typing import Any

from edgebench.rows.identity import HEADLINE


def render_csv(rows: list[dict[str, Any]]) -> str:
    """Stored result rows -> CSV text with a header line (columns as in Store.rows)."""
    cols = ["run_id", "created", "kind", "row_index", *HEADLINE, "n_samples"]
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=cols, extrasaction="ignore", lineterminator="\n")
    w.writeheader()
    for r in rows:
        w.writerow({k: ("" if r.get(k) is None else r.get(k)) for k in cols})
    return buf.getvalue()

