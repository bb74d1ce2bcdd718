#!/usr/bin/env python3
"""edgebench model-I/O worker: load an untrusted .tflite in its own process and describe it.

Reading a model's inputs and outputs means building and allocating an interpreter, and a
hostile or broken model can make that allocate gigabytes (a declared 0.8 GB input tensor
allocated 12 GiB) or crash the runtime. So edgebench never does it in its own process: this
worker does it, started by ``targets.host.describe_model`` exactly like the timing worker
(``runner.py``, whose functions it reuses: it runs as a script next to it, so ``import runner``
loads that standalone file), under the same deadline, crash and exit-code handling.

Usage::

    python model_io.py job.json

``job.json``: ``{"model_path": ..., "inputs_npz": null | path, "seed": 0, "out_dir": dir,
"prepare": false}``. Writes ``result.json`` with ``status``, ``inputs`` / ``outputs`` (signature
order: name, index, shape, shape_signature, dtype, scale, zero_point), ``has_signature``, ``tensor_inputs`` /
``tensor_outputs`` (the interpreter's own order and tensor names, which benchmark_model uses) and,
with ``prepare``, ``n`` and ``source``; plus ``result.npz`` with ``in::<tensor index>``: the
InputSet prepared exactly as the timing worker feeds it (dtype, quantization), every sample
stacked along the first axis. Exit 0 ok, 2 bad input (message in result.json), 3 internal error.
"""

from __future__ import annotations

import sys

import numpy as np

import runner_io as rn  # the standalone worker's runtime and tensor helpers, beside this file


def describe(job: dict) -> tuple[dict, dict[str, np.ndarray]]:
    rn.check_flatbuffer(job["model_path"])
    it = rn.make_interpreter(rn.load_runtime(), job["model_path"], None, "xnnpack")
    ins, outs = rn.io_details(it)
    try:
        has_signature = bool(it.get_signature_list())
    except Exception:  # noqa: BLE001 -- old runtimes
        has_signature = False
    meta: dict = {"inputs": ins, "outputs": outs, "has_signature": has_signature,
                  "tensor_inputs": [rn._detail(d["name"], d) for d in it.get_input_details()],
                  "tensor_outputs": [rn._detail(d["name"], d) for d in it.get_output_details()]}
    arrays: dict[str, np.ndarray] = {}
    if job.get("prepare"):
        if job.get("inputs_npz"):
            data = rn.map_inputs(rn.load_npz(job["inputs_npz"]), ins, job["inputs_npz"])
            meta["source"] = "npz"
        else:
            data = rn.synthetic_inputs(ins, int(job.get("seed", 0)))
            meta["source"] = "synthetic"
        prepared, n = rn.prepare_samples(it, ins, data, meta["source"])
        meta["n"] = n
        for idx, per_sample in prepared.items():
            arrays[f"in::{idx}"] = np.concatenate(per_sample, axis=0)
    return meta, arrays


def main(argv: list[str]) -> int:
    return rn.serve_job(argv, lambda job, _path: describe(job), what="model-I/O worker")


if __name__ == "__main__":
    sys.exit(main(sys.argv))
