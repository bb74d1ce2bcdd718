#!/usr/bin/env python3
"""Measure NPU readiness of the probe CNNs (reference_models/npu_probe.py) on every SoC this host
can check, and how long the readiness report takes: prints a SoCs x models table of N/M (or the
status class) and the wall time of each `edgebench readiness` run, its compiles' seconds (min /
median / max) and the time of the conversion it includes.

    python scripts/readiness_table.py [--soc all,SM7550,SM6450,SM7325,SDM845,QCM6490] [--jobs 2]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

MODELS = (("mobilenet_like", "int8"), ("mobilenet_like", "fp32"), ("unsupported_ops_cnn", "int8"))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--soc", default="all,SM7550,SM6450,SM7325,SDM845,QCM6490",
                    help="'all' (LiteRT's registered SoCs) plus any others a loaded plugin lists")
    ap.add_argument("--jobs", type=int, default=2)
    args = ap.parse_args()
    from edgebench.readiness.aot import vendors
    from edgebench.convert.run import ConvertSettings
    from edgebench.readiness.run import ReadinessSettings, readiness
    from reference_models.npu_probe import export

    socs = args.soc.split(",")
    extra = [s for s in socs if s.lower() != "all"]
    spec = ",".join(s for v in vendors.VENDORS for s in vendors.enum_socs(v)) if "all" in [s.lower() for s in socs] else ""
    spec = ",".join(x for x in (spec, *extra) if x)
    table: dict[str, dict[str, str]] = {}
    timing = []
    with tempfile.TemporaryDirectory() as tmp:
        for name, precision in MODELS:
            p = export(name, Path(tmp) / "src")
            t0 = time.perf_counter()
            doc = readiness(ReadinessSettings(
                convert=ConvertSettings(src=p["saved_model"], precisions=(precision,), data=p["data"],
                                        out_dir=str(Path(tmp) / f"{name}-{precision}")), socs=spec, jobs=args.jobs))
            wall = time.perf_counter() - t0
            col = f"{name} {precision}"
            secs = []
            for r in doc.rows:
                rd = r.readiness
                if rd is None or (r.target or "").startswith(("host", "gpu")):
                    continue
                cell = rd.ops_text if rd.checkable and rd.ops_known else rd.compile_status
                if rd.compile_status == "compile-failed":
                    cell += " failed"
                table.setdefault(r.target, {})[col] = cell
                if rd.compile_seconds is not None:
                    secs.append(rd.compile_seconds)
            conv = doc.get("seconds")
            timing.append((col, wall, len(doc.rows), secs, conv))
    cols = [f"{n} {p}" for n, p in MODELS]
    w = max(len(t) for t in table)
    print(f"{'target':<{w}}  " + "  ".join(f"{c:<24}" for c in cols))
    for t, cells in table.items():
        print(f"{t:<{w}}  " + "  ".join(f"{cells.get(c, '-'):<24}" for c in cols))
    print()
    for col, wall, n, secs, _ in timing:
        s = sorted(secs)
        print(f"{col}: {n} rows in {wall:.1f} s wall (conversion, compiles with --jobs {args.jobs}, GPU row, host run); "
              f"{len(s)} compiles: min {s[0]:.2f} s, median {statistics.median(s):.2f} s, max {s[-1]:.2f} s" if s else
              f"{col}: {n} rows in {wall:.1f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
