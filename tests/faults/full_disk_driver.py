"""Run edgebench commands with standard output redirected onto a full disk (used by
``test_stdout_full_disk.py``; run inside ``unshare -rm``, where mounting a tmpfs needs no privileges).

``python full_disk_driver.py SPEC.json``: SPEC holds ``root`` and ``jobs`` (``argv``, ``free``: 0 or
4096 bytes left on the disk). For each job a fresh 4 KiB tmpfs is mounted (filled first when
``free`` is 0), a child *forked* from this process -- which imported the command line and
TensorFlow once, so each command does not pay for that again -- points file descriptor 1 at a file
on it and runs ``edgebench.cli.run()``, the console script's own entry (strict stdout, fast exit).
Writes ``root/results.json``: per job the exit code, the bytes that reached the disk and stderr.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time


def main() -> None:
    spec = json.loads(open(sys.argv[1]).read())
    import importlib

    import edgebench.cli as cli

    # imported once here, inherited by every forked command (each would pay for them again)
    for name in ("tensorflow", "sqlalchemy", "edgebench.store.db", "edgebench.judge.stats", "edgebench.convert_and_compare.pipeline",
                 "edgebench.bench.run", "edgebench.diagnose.run", "edgebench.matrix.run", "edgebench.train.sweep",
                 "edgebench.report.terminal.compare", "edgebench.report.markdown", "typer._adapters",
                 "rich.table", "rich.markdown"):
        importlib.import_module(name)

    results = []
    for i, job in enumerate(spec["jobs"]):
        disk = os.path.join(spec["root"], f"disk{i}")
        os.makedirs(disk, exist_ok=True)
        subprocess.run(["mount", "-t", "tmpfs", "-o", "size=4k", "tmpfs", disk], check=True)
        if job["free"] == 0:
            with open(os.path.join(disk, "filler"), "wb") as fh:
                fh.write(b"\0" * 4096)
        out = os.path.join(disk, "out")
        err = os.path.join(spec["root"], f"stderr{i}.txt")
        start = time.monotonic()
        pid = os.fork()
        if pid == 0:
            try:
                os.dup2(os.open(out, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644), 1)
                os.dup2(os.open(err, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644), 2)
                sys.argv = ["edgebench", *job["argv"]]
                cli.run()
            finally:
                os._exit(99)       # run() never returns: reaching this is a failure of the test
        _, status, usage = os.wait4(pid, 0)
        with open(out, "rb") as fh:
            written = fh.read()
        results.append({"argv": job["argv"], "rc": os.waitstatus_to_exitcode(status), "written": len(written),
                        "seconds": round(time.monotonic() - start, 2),
                        "cpu_s": round(usage.ru_utime + usage.ru_stime, 2),
                        "stderr": open(err, encoding="utf-8", errors="replace").read()})
    with open(os.path.join(spec["root"], "results.json"), "w") as fh:
        json.dump(results, fh)


if __name__ == "__main__":
    main()
