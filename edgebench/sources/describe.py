"""The manifest's description of a .tflite: op histogram, quantization coverage, I/O tensors and GPU readiness.

``gpu_readiness`` checks the GPU without a phone: the model analyzer's verdict (with its caveat) and,
where a Vulkan driver exists, a real WebGPU compile in a child process
(``python -m edgebench.targets.runner_profile --gpu-check``).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from edgebench.model.tflite_model import inspect

ANALYZER_NOTE = ("the model analyzer's GPU check (gpu_compatibility=True) in TF 2.21 and ai-edge-litert 2.3 "
                 "reports every model compatible: a model with UNIQUE, which LiteRT's GPU accelerator rejects, "
                 "passes it; the webgpu check below compiles the model for the GPU instead")


def gpu_readiness(model_path: str, timeout_s: float = 180.0) -> dict[str, Any]:
    """GPU readiness of a .tflite without a phone: the analyzer's verdict (with its caveat) and,
    when a Vulkan driver is configured (a real GPU or scripts/software_gpu), a real compile for
    LiteRT's WebGPU accelerator in a child process (a driver crash cannot take convert down)."""
    out: dict[str, Any] = {"analyzer": _analyzer_gpu(model_path), "analyzer_note": ANALYZER_NOTE}
    has_driver = bool(os.environ.get("VK_ICD_FILENAMES")) or any(Path("/dev/dri").glob("renderD*"))
    if not has_driver:
        out["webgpu"] = {"checked": False, "reason": "no Vulkan driver here (no /dev/dri render node, no "
                                                     "VK_ICD_FILENAMES); scripts/software_gpu sets up Mesa's"}
        return out
    try:
        proc = subprocess.run([sys.executable, "-m", "edgebench.targets.runner_profile", "--gpu-check", str(model_path)], capture_output=True,
                              text=True, timeout=timeout_s, stdin=subprocess.DEVNULL, check=False)
        out["webgpu"] = (json.loads(proc.stdout.strip().splitlines()[-1]) if proc.returncode == 0 and proc.stdout.strip()
                         else {"checked": False, "reason": f"the GPU check exited {proc.returncode}: "
                                                           f"{(proc.stderr.strip().splitlines() or [''])[-1][:200]}"})
    except subprocess.TimeoutExpired:
        out["webgpu"] = {"checked": False, "reason": f"the GPU check did not finish in {timeout_s:g} s"}
    return out


def _analyzer_gpu(model_path: str) -> str:
    try:
        # lazy: a private module of ai-edge-litert that some builds lack; the description degrades to "unavailable"
        from ai_edge_litert import _pywrap_analyzer_wrapper as analyzer  # type: ignore
    except ImportError:
        return "unavailable (no ai_edge_litert analyzer)"
    text = analyzer.ModelAnalyzer(str(model_path), True, True)
    warnings = [ln.strip() for ln in text.splitlines() if "GPU COMPATIBILITY WARNING" in ln]
    if warnings:
        return "incompatible: " + "; ".join(warnings)
    return "compatible" if "looks compatible with GPU delegate" in text else "unknown"


def describe_tflite(path: "str | os.PathLike[str]") -> dict[str, Any]:
    """Op histogram, quantization coverage and I/O tensor details of a .tflite file."""
    info = inspect(str(path))
    keep = ("inputs", "outputs", "op_count", "op_histogram", "quantized", "float_op_histogram",
            "quantization_coverage", "flops", "counted_ops")
    out = {k: info[k] for k in keep if k in info}
    if info.get("flops_note"):
        out["flops_note"] = info["flops_note"]
    if info.get("subgraph_roles"):          # the subgraphs the model's ops run (JSON keys are strings)
        out["subgraph_roles"] = {str(k): v for k, v in info["subgraph_roles"].items()}
    # Quantization coverage: the compute ops that stayed float (index + op type) in a quantized model;
    # an op of another subgraph (a loop body) says which: "FULLY_CONNECTED#0 (subgraph 2, WHILE body)".
    roles = info.get("subgraph_roles") or {}
    out["float_ops"] = [f"{o['op']}#{o['index']}" + (f" (subgraph {o['subgraph']}, {roles.get(o['subgraph'], '?')})"
                                                    if o.get("subgraph") else "")
                        for o in info.get("float_ops", [])]
    out["gpu_compatibility"] = gpu_readiness(str(path))     # host readiness without a phone (issue 15)
    return out
