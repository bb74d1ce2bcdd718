#!/usr/bin/env python3
"""Why INT8 on the arm64 board differs from the x86 host without XNNPACK: kernel or emulator?

Runs one INT8 model with the same inputs and the same LiteRT release on the host (x86) and on
the board (aarch64 under qemu-user) for several emulated cores, with three op resolvers:
``xnnpack`` (default delegate), ``none`` (the default optimized builtin kernels) and ``ref``
(TFLite's reference kernels), keeping every intermediate tensor. It prints

1. the output difference vs the host in units of the output's quantization step (LSB);
2. whether the emulated cores agree with each other (ARMv8.0 cores without dot product take
   other kernel code paths than ARMv8.2 cores);
3. for each CONV_2D (stride 1, no dilation) and FULLY_CONNECTED with ``none``: recomputing the
   op in exact integer arithmetic from that side's own int8 input, the share of outputs equal to
   TFLite's reference requantization (``MultiplyByQuantizedMultiplier``: a rounding doubling
   high multiply, then a rounding shift -- two roundings) and to one correct rounding of
   ``acc * M`` (M = input_scale * filter_scale / output_scale as TFLite's 31-bit multiplier).

If the board's builtin kernels equal the single rounding exactly while the host equals the
reference, the difference is the ARM kernels' arithmetic, not emulation (an emulator bug would
not produce exactly the correctly rounded value everywhere, nor agree across core models).

Usage: scripts/board_int8_rounding.py [--model M_int8.tflite] [--samples 200]
       (needs root and qemu-user + binfmt, like the board; without --model the digits INT8
       model is converted into a temp dir)
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

CORES = ("cortex-a53", "cortex-a72", "neoverse-n1", "cortex-a76")
MODES = ("xnnpack", "none", "ref")

WORKER = r'''
import json, sys, numpy as np
from ai_edge_litert.interpreter import Interpreter, OpResolverType
model, inputs, mode, out = sys.argv[1:5]
kw = {"model_path": model, "num_threads": 1, "experimental_preserve_all_tensors": True}
if mode == "none":
    kw["experimental_op_resolver_type"] = OpResolverType.BUILTIN_WITHOUT_DEFAULT_DELEGATES
elif mode == "ref":
    kw["experimental_op_resolver_type"] = OpResolverType.BUILTIN_REF
it = Interpreter(**kw)
it.allocate_tensors()
x = np.load(inputs)["x"]
d = it.get_input_details()[0]
keep = {}
for i in range(len(x)):
    it.set_tensor(d["index"], x[i:i + 1].astype(d["dtype"]))
    it.invoke()
    for t in it.get_tensor_details():
        try:
            keep.setdefault(t["index"], []).append(it.get_tensor(t["index"]).copy())
        except ValueError:
            pass
np.savez(out, **{f"t{k}": np.stack(v) for k, v in keep.items()})
'''


def digits_int8(tmp: Path) -> Path:
    r = subprocess.run([sys.executable, "-m", "edgebench", "convert", "digits", "-p", "int8", "--out", str(tmp),
                        "--json", "-"], capture_output=True, text=True, check=True)
    return Path(json.loads(r.stdout)["variants"]["int8"]["path"])


def digits_inputs(n: int) -> np.ndarray:
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from reference_models.datasets import load_split

    return load_split()[2][:n].astype(np.float32)


def run_board(cached: Path, root: Path, core: str, model: Path, mode: str) -> dict[str, np.ndarray]:
    """The worker inside the board clone ROOT, as the simulated device runs commands."""
    from edgebench.targets.sim.adbd import SimConfig, SimDevice

    dev = SimDevice(root, SimConfig.for_board(cached, qemu_cpu=core))
    dev.build()                     # /proc/cpuinfo and /sys describe this core
    out = f"/data/local/tmp/rounding/{core}_{mode}.npz"
    cmd = f"cd /data/local/tmp/rounding && python3 worker.py {model.name} inputs.npz {mode} {out}"
    r = subprocess.run(dev.shell_argv(cmd), env=dev.shell_env(), capture_output=True, text=True, check=False)
    if r.returncode != 0:
        raise SystemExit(f"{core} {mode}: exit {r.returncode}: {r.stderr.strip()[-400:]}")
    with np.load(root / out.lstrip("/")) as z:
        return {k: z[k] for k in z.files}


def run_host(work: Path, model: Path, mode: str) -> dict[str, np.ndarray]:
    out = work / f"host_{mode}.npz"
    subprocess.run([sys.executable, str(work / "worker.py"), str(model), str(work / "inputs.npz"), mode, str(out)],
                   check=True, capture_output=True)
    with np.load(out) as z:
        return {k: z[k] for k in z.files}


def quantized_multiplier(m: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """TFLite's QuantizeMultiplier: m = q / 2^31 * 2^shift, q in [2^30, 2^31)."""
    frac, shift = np.frexp(m)
    q = np.round(frac * (1 << 31)).astype(np.int64)
    shift = np.where(q == (1 << 31), shift + 1, shift).astype(np.int64)
    q = np.where(q == (1 << 31), q // 2, q)
    return q, shift


def requant_reference(acc: np.ndarray, q: np.ndarray, shift: np.ndarray) -> np.ndarray:
    """MultiplyByQuantizedMultiplier (gemmlowp SaturatingRoundingDoublingHighMul + RoundingDivideByPOT)."""
    x = acc * (np.int64(1) << np.maximum(shift, 0))
    ab = x * q
    s = ab + np.where(ab >= 0, np.int64(1) << 30, 1 - (np.int64(1) << 30))
    hi = np.where(s >= 0, s >> 31, -((-s) >> 31))            # C division truncates toward zero
    e = np.maximum(-shift, 0)
    mask = (np.int64(1) << e) - 1
    return (hi >> e) + ((hi & mask) > ((mask >> 1) + (hi < 0)))


def requant_single(acc: np.ndarray, q: np.ndarray, shift: np.ndarray) -> np.ndarray:
    """One rounding (half up) of acc * q / 2^(31 - shift)."""
    tot = (31 - shift).astype(np.int64)
    return (acc * q + (np.int64(1) << (tot - 1))) >> tot


def accumulate(op: str, x: np.ndarray, w: np.ndarray, b: np.ndarray | None, x_zp: int, out_shape) -> np.ndarray | None:
    x = x.astype(np.int64) - x_zp
    w = w.astype(np.int64)
    if op == "FULLY_CONNECTED":
        acc = x.reshape(x.shape[0], -1, w.shape[1]) @ w.T
        acc = acc.reshape(out_shape)
    else:
        n, h, wd, _ = x.shape
        o, kh, kw, _ = w.shape
        oh, ow = out_shape[1:3]
        if not ((oh, ow) == (h, wd) or (oh, ow) == (h - kh + 1, wd - kw + 1)):
            return None                                         # stride or dilation != 1
        ph, pw = oh - 1 + kh - h, ow - 1 + kw - wd
        xp = np.pad(x, ((0, 0), (ph // 2, ph - ph // 2), (pw // 2, pw - pw // 2), (0, 0)))
        acc = np.zeros((n, oh, ow, o), np.int64)
        for i in range(kh):
            for j in range(kw):
                acc += np.einsum("nhwc,oc->nhwo", xp[:, i:i + oh, j:j + ow, :], w[:, i, j, :])
    return acc + (b.astype(np.int64) if b is not None else 0)


def rounding_table(model: Path, dumps: dict[str, dict[str, np.ndarray]]) -> list[str]:
    from ai_edge_litert.interpreter import Interpreter

    it = Interpreter(model_path=str(model))
    it.allocate_tensors()
    det = {t["index"]: t for t in it.get_tensor_details()}
    lines = []
    for o in it._get_ops_details():
        if o["op_name"] not in ("CONV_2D", "FULLY_CONNECTED"):
            continue
        xi, wi = int(o["inputs"][0]), int(o["inputs"][1])
        bi = int(o["inputs"][2]) if len(o["inputs"]) > 2 and o["inputs"][2] >= 0 else None
        yi = int(o["outputs"][0])
        qx, qw, qy = (det[i]["quantization_parameters"] for i in (xi, wi, yi))
        if not len(qy["scales"]) or det[yi]["dtype"] != np.int8:
            continue
        m = float(qx["scales"][0]) * qw["scales"].astype(np.float64) / float(qy["scales"][0])
        q, shift = quantized_multiplier(m)
        w = it.get_tensor(wi)
        b = it.get_tensor(bi) if bi is not None else None
        cells = []
        for side, d in dumps.items():
            x, y = d[f"t{xi}"], d[f"t{yi}"]
            x = x.reshape((-1,) + x.shape[2:])
            y = y.reshape((-1,) + y.shape[2:]).astype(np.int64)
            acc = accumulate(o["op_name"], x, w, b, int(qx["zero_points"][0]), y.shape)
            if acc is None:
                cells.append(f"{side}: skipped (stride/dilation)")
                continue
            zp = int(qy["zero_points"][0])
            lo = max(-128, zp) if (y == zp).mean() > 0.05 and y.min() >= zp else -128   # fused RELU
            ref = np.clip(requant_reference(acc, q, shift) + zp, lo, 127)
            one = np.clip(requant_single(acc, q, shift) + zp, lo, 127)
            cells.append(f"{side}: reference {100 * (ref == y).mean():.2f}% / single {100 * (one == y).mean():.2f}%")
        lines.append(f"  {o['op_name']} #{o['index']}: " + "; ".join(cells))
    return lines


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", help="an INT8 .tflite with float or int8 input (default: digits INT8)")
    ap.add_argument("--samples", type=int, default=200)
    args = ap.parse_args()
    from edgebench.targets.sim import board

    reason = board.unavailable_reason()
    if reason:
        raise SystemExit(reason)
    root_src = board.ensure(log=lambda m: print(m, file=sys.stderr))
    tmp = Path(tempfile.mkdtemp(prefix="eb-rounding-"))
    try:
        model = Path(args.model) if args.model else digits_int8(tmp / "model")
        if args.model is None:
            x = digits_inputs(args.samples)
        else:
            from ai_edge_litert.interpreter import Interpreter

            it = Interpreter(model_path=str(model))
            d = it.get_input_details()[0]
            x = np.random.default_rng(0).uniform(0, 1, (args.samples,) + tuple(d["shape"][1:])).astype(np.float32)
        root = tmp / "board"
        board.clone(root_src, root)
        work = root / "data/local/tmp/rounding"
        work.mkdir(parents=True)
        (work / "worker.py").write_text(WORKER)
        np.savez(work / "inputs.npz", x=x)
        shutil.copy(model, work / model.name)
        for p in [work, *work.iterdir()]:
            os.chown(p, board.SHELL_UID, board.SHELL_UID)
        from ai_edge_litert.interpreter import Interpreter

        it = Interpreter(model_path=str(model))
        od = it.get_output_details()[0]
        # the output's quantization step: its own, or that of the int8 tensor a DEQUANTIZE reads
        deq = {int(o["outputs"][0]): int(o["inputs"][0]) for o in it._get_ops_details() if o["op_name"] == "DEQUANTIZE"}
        q_index = deq.get(int(od["index"]), int(od["index"]))
        oq = {t["index"]: t for t in it.get_tensor_details()}[q_index]["quantization_parameters"]["scales"]
        lsb = float(oq[0]) if len(oq) else None
        out_key = f"t{od['index']}"
        print(f"model {model.name}, {len(x)} inputs, output LSB {lsb}")
        none_dumps = {}
        for mode in MODES:
            host = run_host(work, model, mode)
            results = {core: run_board(root_src, root, core, model, mode) for core in CORES}
            h = host[out_key].astype(np.float64)
            row = []
            for core, d in results.items():
                diff = np.abs(d[out_key].astype(np.float64) - h)
                if od["dtype"] != np.float32 and lsb:
                    diff = diff * lsb                            # int8 output: to real units first
                worst = f"{diff.max() / lsb:.3g} LSB" if lsb else f"{diff.max():.3g}"
                row.append(f"{core} max {worst}, {100 * (diff > 0).mean():.2f}% differ")
            same = all(np.array_equal(results[c][out_key], results[CORES[0]][out_key]) for c in CORES)
            print(f"{mode:8s} vs host: " + "; ".join(row) + f"; cores agree with each other: {same}")
            if mode == "none":
                none_dumps = {"host": host, **{c: results[c] for c in ("cortex-a53", "cortex-a76")}}
        print("requantization recomputed from each side's own int8 input (delegate none):")
        print("\n".join(rounding_table(model, none_dumps)))
        print(json.dumps({"board": str(root_src), "manifest_wheels": board.manifest(root_src)["wheels"]}))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return 0



if __name__ == "__main__":
    sys.exit(main())
