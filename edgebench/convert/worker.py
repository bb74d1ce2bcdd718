"""Conversions in a process of their own: a converter crash is one failed variant, never a dead CLI.

TensorFlow's converter and calibrator are native code that can crash the process that calls them
(TF 2.21 segfaults in ``_feed_tensors`` while calibrating int8 of a Keras ``stateful=True`` LSTM):
exit 139, nothing printed, no manifest, the FP32 file already converted lost. So ``convert`` runs
the calibrated precisions in a worker process (``python -m edgebench.convert.run JOB``, started like every host
worker: ``targets.host_pool.start_worker``, its own session, ``kill_group`` on Ctrl-C), which
converts them one after the other and leaves, per precision, ``<p>.tflite`` then ``<p>.json``
(written last: its presence means the variant is complete) and, before each stage, ``stage.json``.
The parent reads each variant as soon as it is complete. When the worker dies by a signal, the
precision it was converting is a failed variant naming the signal and the stage (``converting``,
``calibrating, sample i of n``, ``quantizing``) and a new worker converts the rest.

Only the calibrated precisions (int8, int16x8) go to the worker: calibration is where TensorFlow
runs the model through native code, and the worker costs a second TensorFlow import (~5 s of CPU).
The worker is started before the parent loads the source, so its import overlaps with the parent's
(``prestart``), and it converts while the parent converts fp32/fp16/dynamic in its own process;
``scripts/bench_convert_isolation.py`` measures what it costs. ``EDGEBENCH_CONVERT_ISOLATED=0``
converts everything in the command's own process (that benchmark's A side).

Job (JSON): ``src``, ``size``, ``seed``, ``work_dir`` (the conversion's folder: a Keras source's
export is cached there), ``options`` (``SourceOptions`` fields), ``precisions`` (in order),
``calibration_npz`` (the calibration InputSet, or null), ``calibration_samples``, ``int8_io``,
``out_dir`` (the worker's own folder), ``source`` (the source the command resolved, ``Source.to_job``:
the worker converts it as handed and reads the model itself only to fall back to the dynamic batch).
A precision's ``<p>.json``: ``status`` ok | failed, ``qinfo``,
``seconds``, ``error``, ``error_detail``, ``bad_input``, and ``fallback`` (the static-batch refusal
that made the worker convert with the dynamic batch from that precision on).
"""

from __future__ import annotations

import dataclasses
import json
import os
import resource
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import warnings
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Callable, Iterator

from edgebench.core.errors import BadInput, EdgebenchError, InfraError
from edgebench.model.inputs import InputSet
from edgebench.sources.resolve import Source, SourceOptions, calibration_feed, finish_tflite, resolve_source
from edgebench.targets.host_pool import kill_group, start_worker

ISOLATION_ENV = "EDGEBENCH_CONVERT_ISOLATED"
WAIT_FLAG = "--wait-job"          # import TensorFlow, say ready, read the job path from stdin
READY_FILE = "ready"
POLL_S = 0.05
# A conversion that has not finished after this long is a hung converter (a full-size ResNet-50
# int8 conversion with calibration takes minutes on a laptop core, not hours).
DEADLINE_S = 4 * 3600.0


def isolated() -> bool:
    return os.environ.get(ISOLATION_ENV, "1") != "0"


def _signal_name(rc: int) -> str:
    try:
        return signal.Signals(-rc).name
    except ValueError:
        return f"signal {-rc}"


def _write_json(path: Path, obj: dict[str, Any]) -> None:
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(obj))
    os.replace(tmp, path)        # a reader never sees half a file


# ----------------------------------------------------------------------------- the parent side


class Worker:
    """A conversion worker: started early (its TensorFlow import overlaps the parent's work), then
    handed one job; ``kill`` ends it and everything it started."""

    def __init__(self) -> None:
        self.work = Path(tempfile.mkdtemp(prefix="edgebench-convert-"))
        self.proc: subprocess.Popen | None = start_worker(
            [sys.executable, "-m", "edgebench.convert.run", WAIT_FLAG], self.work, stdin=subprocess.PIPE)

    def hand(self, job: dict[str, Any]) -> None:
        job = {**job, "out_dir": str(self.work)}
        path = self.work / "job.json"
        path.write_text(json.dumps(job))
        try:
            self.proc.stdin.write(f"{path}\n".encode())
            self.proc.stdin.close()
        except OSError:            # it died while waiting: read below like any worker without results
            pass

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            kill_group(self.proc)
        self.proc = None


_WAITING: list[Worker] = []


def prestart() -> None:
    """Start a worker now (its TensorFlow import overlaps what the parent does next); ``take``
    hands it its job. No-op when one is already waiting or isolation is off."""
    if isolated() and not _WAITING:
        _WAITING.append(Worker())


def take() -> Worker | None:
    """The waiting worker, else a new one; None when conversions run in this process."""
    if not isolated():
        return None
    return _WAITING.pop() if _WAITING else Worker()


@contextmanager
def prestarted(needed: bool = True) -> Iterator[None]:
    """``prestart`` (when ``needed``) for the duration of a command; a worker nobody took is ended at
    the exit."""
    if needed:
        prestart()
    try:
        yield
    finally:
        while _WAITING:
            w = _WAITING.pop()
            w.kill()
            _rmtree(w.work)


def job_for(settings_src: str, *, size: str, seed: int, work_dir: Path, options: SourceOptions,
            precisions: list[str], calibration: InputSet | None, n_cal: int, int8_io: str,
            source: Source | None = None) -> dict[str, Any]:
    """A worker job for these precisions (the calibration set is saved beside the worker's files).
    ``source``: the source the command resolved with these options; the worker converts it as
    handed (``Source.from_job``) and reads the model again only for a static-batch fallback."""
    return {"src": settings_src, "size": size, "seed": seed, "work_dir": str(Path(work_dir).resolve()),
            "cwd": os.getcwd(),     # relative paths and --import modules are the command's
            "options": dataclasses.asdict(options), "precisions": list(precisions),
            "calibration": calibration, "calibration_samples": n_cal, "int8_io": int8_io,
            "source": None if source is None else source.to_job()}


def _crash(rc: int, stage: dict[str, Any] | None, tail: str) -> dict[str, Any]:
    what = (stage or {}).get("stage") or "starting"
    prec = (stage or {}).get("precision")
    reason = (f"the converter crashed with {_signal_name(rc)} while {what} ({prec}); this is a crash inside "
              "TensorFlow's converter, not your data: the other precisions are kept; convert this precision with "
              "another TensorFlow version, or use one that needs no calibration (-p dynamic, fp16)")
    return {"status": "failed", "error": reason, "error_detail": tail or None, "crashed": _signal_name(rc),
            "stage": what, "seconds": None}


class Isolated:
    """Conversions of ``job["precisions"]`` in worker processes, started at once (the parent goes on
    with its own work meanwhile): ``next()`` returns (precision, result, .tflite bytes or None) in
    order, as each completes. A worker killed by a signal fails the precision it was converting
    (``_crash``) and a new worker takes the rest; a worker that exits otherwise without a result
    raises (BadInput for exit 2) with its message or last stderr line. ``close`` ends the worker."""

    def __init__(self, job: dict[str, Any], say: Callable[[str], None], worker: Worker | None = None) -> None:
        self.left = list(job["precisions"])
        self.cal = job.pop("calibration", None)
        self.job, self.say, self.said = job, say, set()
        self.w: Worker | None = None
        self._start(worker)

    def _start(self, worker: Worker | None) -> None:
        self.w = worker if worker is not None else Worker()
        cal_path = None
        if self.cal is not None:
            cal_path = self.w.work / "calibration.npz"
            self.cal.save(cal_path)
        self.w.hand({**self.job, "precisions": self.left,
                     "calibration_npz": None if cal_path is None else str(cal_path)})
        self.t_end = time.monotonic() + DEADLINE_S

    def close(self) -> None:
        if self.w is not None:
            self.w.kill()
            _rmtree(self.w.work)
            self.w = None

    def next(self) -> tuple[str, dict[str, Any], bytes | None]:
        w, p = self.w, self.left[0]
        if p not in self.said:
            self.said.add(p)
            self.say(f"converting {p}")
        res_path = w.work / f"{p}.json"
        while True:
            if res_path.is_file():
                res = json.loads(res_path.read_text())
                data = (w.work / f"{p}.tflite").read_bytes() if res.get("status") == "ok" else None
                self.left.pop(0)
                if not self.left:
                    self.close()
                return p, res, data
            rc = w.proc.poll()
            if rc is not None and not res_path.is_file():
                break
            if time.monotonic() > self.t_end:
                self.close()
                raise InfraError(f"converting {p} hung: no result after {DEADLINE_S:g} s; the worker was killed")
            time.sleep(POLL_S)
        stage, tail, result = _read(w.work / "stage.json"), _tail(w.work / "stderr.txt"), _read(w.work / "result.json")
        self.close()
        if rc < 0:
            self.left.pop(0)
            if self.left:
                self._start(None)           # a new worker for the rest
            return p, _crash(rc, stage if (stage or {}).get("precision") == p else None, tail), None
        err = (result or {}).get("error") or tail or f"the conversion worker exited with status {rc}"
        if rc == 2 or (result or {}).get("error_kind") == "bad_input":
            raise BadInput(err)
        raise InfraError(f"the conversion worker exited with status {rc} before converting {', '.join(self.left)}: "
                         f"{err}")


def _read(path: Path) -> dict[str, Any] | None:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


def _tail(path: Path, limit: int = 400) -> str:
    try:
        lines = [ln.strip() for ln in path.read_text(errors="replace").splitlines() if ln.strip()]
    except OSError:
        return ""
    lines = [ln for ln in lines if not ln.startswith(("INFO:", "WARNING: All log messages", "I0000", "W0000",
                                                      "E0000"))]
    return lines[-1][:limit] if lines else ""


def _rmtree(path: Path) -> None:
    shutil.rmtree(path, ignore_errors=True)


# ----------------------------------------------------------------------------- the worker side


def serve(argv: list[str], converters: dict[str, Callable], qat_converter: Callable,
          one_line: Callable[[BaseException], str]) -> int:
    """The worker's main (``python -m edgebench.convert.run [--wait-job | JOB]``): convert the job's
    precisions in order with ``converters`` (``convert.PRECISIONS``; ``qat_converter`` for int8 of a
    QAT model), leaving the files the module docstring lists. Exit 0, or 2 for bad input (the
    source or calibration data cannot be read; ``result.json`` says why)."""
    if len(argv) > 1 and argv[1] == WAIT_FLAG:
        import tensorflow  # noqa: F401 -- the import is what a waiting worker does ahead of its job

        Path(READY_FILE).write_text("1")
        job_path = sys.stdin.readline().strip()
        if not job_path:
            return 0             # told to exit
    elif len(argv) > 1:
        job_path = argv[1]
    else:
        print("usage: python -m edgebench.convert.run JOB.json", file=sys.stderr)
        return 2
    job = json.loads(Path(job_path).read_text())
    out = Path(job["out_dir"])
    if job.get("cwd"):          # the command's folder: its relative paths and --import modules
        os.chdir(job["cwd"])
        sys.path.insert(0, job["cwd"])

    def stage(prec: str, what: str) -> None:
        _write_json(out / "stage.json", {"precision": prec, "stage": what})

    try:
        cal = InputSet.load(job["calibration_npz"]) if job.get("calibration_npz") else None
        for prec, res, data in convert_each(job, cal, converters, qat_converter, one_line, stage=stage):
            if data is not None:
                (out / f"{prec}.tflite").write_bytes(data)
            _write_json(out / f"{prec}.json", res)
    except EdgebenchError as e:
        _write_json(out / "result.json", {"status": "failed", "error": str(e),
                                          "error_kind": "bad_input" if isinstance(e, BadInput) else "infra"})
        return 2 if isinstance(e, BadInput) else 3
    return 0


def _tuples(v: Any) -> Any:
    return tuple(_tuples(x) for x in v) if isinstance(v, list) else v


def options_of(d: dict[str, Any]) -> SourceOptions:
    """``SourceOptions`` back from its JSON form (lists become the tuples they were)."""
    return SourceOptions(**{k: _tuples(v) for k, v in d.items()})


def convert_each(job: dict[str, Any], cal_ds: InputSet | None, converters: dict[str, Callable],
                 qat_converter: Callable, one_line: Callable[[BaseException], str], *, src=None,
                 stage: Callable[[str, str], None] = lambda _p, _s: None
                 ) -> Iterator[tuple[str, dict[str, Any], bytes | None]]:
    """Convert ``job["precisions"]`` in order (in this process): (precision, result, bytes or None).
    An automatic static batch the converter refuses on the first precision is converted again with
    the dynamic batch, from then on (``fallback`` in that result). ``src``: the source already
    resolved with the job's options (else resolved here)."""
    opts = options_of(job["options"])
    where = dict(size=job["size"], work_dir=Path(job["work_dir"]), seed=job["seed"])
    if src is None:
        src = Source.from_job(job["source"]) if job.get("source") else resolve_source(job["src"], options=opts, **where)
    n_cal = int(job.get("calibration_samples") or 0)
    current = {"precision": ""}

    def feed(source):
        if cal_ds is None:
            return None
        inner = calibration_feed(source, cal_ds, n_cal)

        def gen():
            n = min(n_cal, cal_ds.n)
            for i, sample in enumerate(inner()):
                stage(current["precision"], f"calibrating, sample {i + 1} of {n}")
                yield sample
            stage(current["precision"], "quantizing")
        return gen

    calib = feed(src)
    for k, prec in enumerate(job["precisions"]):
        current["precision"] = prec
        stage(prec, "converting")
        t0 = time.perf_counter()
        res: dict[str, Any] = {"precision": prec}
        conv = qat_converter if (prec == "int8" and src.qat) else converters[prec]
        data = None
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                try:
                    data, qinfo = conv(src, calib, job["int8_io"])
                except BadInput:
                    raise
                except Exception as e:  # noqa: BLE001 -- an automatic static batch the model cannot take
                    if k != 0 or not opts.static_batch_auto or not src.fixed_shapes:
                        raise
                    res["fallback"] = one_line(e)
                    stage(prec, "converting with the dynamic batch")
                    opts = opts.dynamic_batch()
                    src = resolve_source(job["src"], options=opts, **where)
                    calib = feed(src)
                    data, qinfo = conv(src, calib, job["int8_io"])
                data = finish_tflite(src, data)
        except BadInput as e:
            data = None
            res.update(status="failed", error=str(e), bad_input=True)
        except InfraError:
            raise
        except Exception as e:  # noqa: BLE001 -- the converter's own error: this variant failed
            data = None
            res.update(status="failed", error=one_line(e), error_detail=str(e)[:20000])
        else:
            res.update(status="ok", qinfo=qinfo)
        res["seconds"] = round(time.perf_counter() - t0, 3)
        res["peak_rss_bytes"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
        yield prec, res, data
