"""Record the golden tests' input documents ONCE from real edgebench runs, then freeze them here.

Not a test and not run by the tests: the goldens render these frozen files, so their output never
depends on this machine's timings. Rerun only to replace the inputs on purpose (new fields a
renderer should show), then regenerate the goldens (see tests/test_goldens.py):

    PYTHONPATH=$PWD TF_CPP_MIN_LOG_LEVEL=2 python tests/goldens/inputs/record.py

It runs, in a temporary folder with its own results store: convert-and-compare digits (four
precisions, gate), convert-and-compare with --keep-float auto, one whose int8 fails a PSNR gate,
bench with concurrency, cold starts and an op profile, a sustained + paced bench, diagnose (int8,
fp16), a 4-cell matrix run twice (shard 1/2, then the whole with --resume) and, with the npu-qualcomm
and npu-intel extras installed, readiness of the probe CNN with unusual ops. Timings are kept as
recorded; only the machine's paths and host name are replaced (``scrub``) so the files say nothing
about where they were made.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent

MATRIX = """\
models: [digits]
precisions: [fp32, int8]
targets: [host]
threads: [1, 2]
delegates: [xnnpack, none]
size: tiny
runs: 200
samples: 100
"""


def edgebench(cwd: Path, *args: str) -> None:
    print("edgebench", " ".join(args), flush=True)
    subprocess.run([sys.executable, "-m", "edgebench", *args], cwd=cwd, check=False,
                   stdout=subprocess.DEVNULL, env={**os.environ, "COLUMNS": "120"})


def scrub(obj, work: Path):
    """The temp folder, the model cache, the interpreter path and the host name -> fixed text."""
    text = json.dumps(obj)
    cache = os.environ.get("EDGEBENCH_CACHE_DIR") or ""
    import sysconfig

    for old, new in ((str(work) + "/", ""), (str(work), "."), (cache, "~/.cache/edgebench") if cache else ("", ""),
                     (sys.executable, "python3"), (sysconfig.get_paths()["purelib"], "site-packages"),
                     (str(Path.home()), "~")):
        if old:
            text = text.replace(json.dumps(old)[1:-1], json.dumps(new)[1:-1])
    obj = json.loads(text)

    def host(o):
        if isinstance(o, dict):
            return {k: ("bench-host" if k == "hostname" and isinstance(v, str) else host(v)) for k, v in o.items()}
        if isinstance(o, list):
            return [host(v) for v in o]
        return o
    return host(obj)


def dump(obj, name: str) -> None:
    """JSON with one key per line but lists of numbers (latency samples) on one line."""
    text = json.dumps(obj, indent=1, ensure_ascii=False)
    text = re.sub(r"\[\s*(-?[\d.eE+-]+(?:,\s*-?[\d.eE+-]+)*)\s*\]",
                  lambda m: "[" + ", ".join(x.strip() for x in m.group(1).split(",")) + "]", text)
    (HERE / name).write_text(text + "\n")
    print("wrote", HERE / name, len(text), "chars")


def record_readiness(work: Path, db: list[str]) -> None:
    """readiness.json: the probe CNN with ATAN2/CUMSUM/BUCKETIZE/SIGN on SoCs that answer every way."""
    sys.path.insert(0, str(HERE.parents[2]))
    from reference_models.npu_probe import export

    p = export("unsupported_ops_cnn", work / "probe")
    edgebench(work, "readiness", p["saved_model"], "--precision", "int8", "--data", p["data"], "--soc",
              "SM8650,SM8350,SM7550,LNL,MT6989,E9965", "--out", "out-ready", "--fail-on", "SM8650", *db,
              "--json", "readiness.json")                                 # exits 1: SM8650 keeps 2 ops on the CPU
    dump(scrub(json.loads((work / "readiness.json").read_text()), work), "readiness.json")


def main() -> None:
    from edgebench.store.db import Store

    with tempfile.TemporaryDirectory(prefix="edgebench-goldens-") as tmp:
        work = Path(tmp)
        db = ["--db", "results.db"]
        edgebench(work, "convert-and-compare", "digits", "--max-accuracy-drop", "1.0", "--runs", "700",
                  "--out", "out-cc", *db, "--json", "compare.json")
        edgebench(work, "convert-and-compare", "digits", "--precision", "fp32,int8", "--keep-float", "auto",
                  "--min-psnr", "60", "--runs", "700", "--out", "out-kf", *db, "--json", "keep-float.json")
        edgebench(work, "convert-and-compare", "digits", "--precision", "fp32,int8", "--min-psnr", "70", "--runs", "700",
                  "--out", "out-gate", *db, "--json", "gate-failed.json")    # exits 1: int8 misses the PSNR gate
        edgebench(work, "bench", "out-cc/digits-tiny_int8.tflite", "out-cc/digits-tiny_fp32.tflite", "--runs", "700",
                  "--concurrency", "1,2", "--cold-starts", "3", "--op-profile", *db, "--json", "bench.json")
        edgebench(work, "bench", "out-cc/digits-tiny_int8.tflite", "--duration", "6", "--report-every", "2",
                  "--period-ms", "2", *db, "--json", "sustained.json")
        edgebench(work, "diagnose", "digits", "--precision", "int8,fp16", "--out", "out-diag", *db,
                  "--json", "diagnose.json")
        (work / "m.yaml").write_text(MATRIX)
        edgebench(work, "matrix", "run", "m.yaml", "--shard", "1/2", *db)
        edgebench(work, "matrix", "run", "m.yaml", "--resume", *db, "--json", "matrix.json")

        for name in ("compare", "keep-float", "gate-failed", "bench", "sustained", "diagnose"):
            dump(scrub(json.loads((work / f"{name}.json").read_text()), work), f"{name}.json")
        env = json.loads((work / "matrix.json").read_text())
        # the report `matrix run` hands render_matrix (edgebench/cli/matrix.py), from its --json envelope
        envelope_keys = ("schema_version", "kind", "created", "edgebench_version", "fingerprint", "rows", "matrix_kind")
        report = {"cells": env["rows"], "kind": env["matrix_kind"],
                  **{k: v for k, v in env.items() if k not in envelope_keys}}
        dump(scrub(report, work), "matrix-report.json")
        record_readiness(work, db)
        with Store(str(work / "results.db")) as st:
            runs = st.list_runs(limit=None)
            dump(scrub({"where": st.where, "runs": runs}, work), "results-list.json")
            cell = next(c for c in report["cells"] if c["status"] == "ok" and c.get("run_id"))
            dump(scrub(st.get(cell["run_id"]), work), "results-show-cell.json")


if __name__ == "__main__":
    main()
