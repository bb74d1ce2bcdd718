"""Parse what LiteRT's ``apply_plugin_main`` and a vendor compiler print into typed facts.

The tool writes LiteRT's own lines to stderr (``INFO: [file.cc:N] ...``, the partition summary
``Partitioned subgraph<0>, selected N ops, from a total of M ops. resulted in K partitions.``, the
plugin's per-op rejections) and the vendor library writes its own to stdout (QNN's validator:
``<E> The SocModel doesn't support FP16`` ... ``<E> Failed to validate op Conv2d_1 with error
0xc26``). The two streams are read apart -- through one pipe they interleave mid-line -- and joined
here: a plugin rejection ``LiteRT Op #3 'Mul' ... is not supported in Qualcomm Compiler`` follows
the ``QNN op validation failed: 'ElementWiseBinary_7'`` blocks of the QNN ops it was lowered to,
whose validator lines name the vendor's reason. "Not supported" covers an op with no QNN
counterpart (``unmapped``: no validator line) and an op the validator refused (``rejected``), so
both lines are kept. Captured logs of real compiles are the test fixtures.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

_PARTITION = re.compile(r"Partitioned subgraph<(\d+)>, selected (\d+) ops, from a total of (\d+) ops\. "
                        r"resulted in (\d+) partitions\.")
_SDK = re.compile(r"Applying plugin with SDK version: (\S+)")
_QNN_OP = re.compile(r"LiteRT Op #(\d+) '([^']+)' \(code=(\d+)\) is not supported in ([^.\n]+)\.")
_QNN_VALIDATION = re.compile(r"QNN op validation failed: '([^']+)' \(type=([^),]+)")
_VALIDATOR_FAILED = re.compile(r"Failed to validate op (\S+) with error (\S+)")
_VENDOR_E = re.compile(r"<E>\s*(.+?)\s*$")
_VENDOR_ERROR = re.compile(r"::ERROR:(.+?)\s*$")
_SKEW = re.compile(r"(Qnn (?:System |backend )?library version \S+ is used\. The version LiteRT using is \S+)\.")
_OV_EXC = re.compile(r"Exception in compilation: (.+?)(?:\n(?:INFO|ERROR|WARNING):|\Z)", re.S)
_OV_DEVICE = re.compile(r"Compiling partition (\d+) for device (\w+)")
_CANNOT_LOAD = re.compile(r'Cannot load library "?([^":\s]+)"?')
_GENERIC = ("QnnBackend_validateOpConfig failed", "Failed to validate op", "RouterX86 graph prepare failed",
            "graphMainFinalizePostPrepare", "unexpected GraphHtpSettings option")


@dataclass(frozen=True)
class LeftOp:
    """One op the plugin left on the CPU: its node index and LiteRT name, the plugin's line and the
    vendor validator's (None when the op has no vendor counterpart at all)."""

    node: int
    op: str
    plugin_line: str
    vendor_line: str | None = None

    @property
    def why(self) -> str:
        return "rejected" if self.vendor_line else "unmapped"


@dataclass(frozen=True)
class PluginLog:
    sdk_version: str | None = None
    ops_total: int | None = None          # over every subgraph the plugin partitioned
    ops_selected: int | None = None
    partitions: int | None = None
    left: tuple[LeftOp, ...] = ()
    error: str | None = None              # why the compile failed (vendor's words first)
    devices: tuple[str, ...] = ()         # Intel: the OpenVINO device each partition compiled for
    notes: tuple[str, ...] = field(default=())

    @property
    def partitioned(self) -> bool:
        return self.ops_total is not None


def _clean(line: str) -> str:
    return " ".join(line.split())


def _vendor_reasons(stdout: str) -> dict[str, str]:
    """QNN op name -> the validator's specific reason (the ``<E>`` lines of its validateOpConfig
    call, generic ones dropped, deduplicated)."""
    out: dict[str, str] = {}
    block: list[str] = []
    for line in stdout.splitlines():
        if "validateOpConfig started" in line:
            block = []
        m = _VALIDATOR_FAILED.search(line)
        if m:
            specific = list(dict.fromkeys(b for b in block if not any(g in b for g in _GENERIC)))
            out[m.group(1)] = "; ".join(specific) if specific else f"QNN validator error {m.group(2)}"
            block = []
            continue
        e = _VENDOR_E.search(line)
        if e:
            block.append(_clean(e.group(1)))
    return out


def _left_ops(stderr: str, reasons: dict[str, str]) -> tuple[LeftOp, ...]:
    out: list[LeftOp] = []
    pending: list[str] = []           # QNN ops that failed validation since the last LiteRT op line
    for line in stderr.splitlines():
        v = _QNN_VALIDATION.search(line)
        if v:
            pending.append(v.group(1))
            continue
        m = _QNN_OP.search(line)
        if m:
            vendor = [reasons.get(q) or f"QNN op {q} failed validation" for q in pending]
            out.append(LeftOp(int(m.group(1)), m.group(2), _clean(m.group(0)),
                              "; ".join(dict.fromkeys(vendor)) if vendor else None))
            pending = []
    return tuple(out)


def _compile_error(stdout: str, stderr: str) -> str | None:
    ov = _OV_EXC.search(stderr)
    if ov:
        text = _clean(ov.group(1))
        lib = _CANNOT_LOAD.search(ov.group(1))
        dev = _OV_DEVICE.findall(stderr)
        where = f"OpenVINO could not compile partition {dev[-1][0]} for {dev[-1][1]}" if dev else "OpenVINO failed"
        if lib:
            name = lib.group(1).rsplit("/", 1)[-1]
            return f"{where}: cannot load {name} ({'the NPU compiler is not in the openvino wheel' if 'npu_compiler' in name else 'missing library'})"
        # OpenVINO chains "Exception from src/...cpp:117:" prefixes; the last one carries the reason
        reason = re.split(r"Exception from \S+:\d+:\s*", text)[-1].strip() or text
        return f"{where}: {reason[:300]}"
    specific = []
    for line in stdout.splitlines():
        m = _VENDOR_ERROR.search(line) or (_VENDOR_E.search(line) if "[ ERROR ]" in line else None)
        if m and not any(g in m.group(1) for g in _GENERIC):
            specific.append(_clean(m.group(1)))
    create = [s for s in specific if "could not create op" in s]
    if create:
        failed = [s for s in specific if "preparation failed" in s or "Op creation failure" in s]
        return "; ".join(dict.fromkeys(create[:2] + failed[:1]))[:400]
    if specific:
        return "; ".join(dict.fromkeys(specific))[:400]
    errors = [_clean(ln.split("]", 1)[-1]) for ln in stderr.splitlines()
              if ln.startswith("ERROR:") and "litert/compiler/plugin" not in ln and "apply_plugin.cc" not in ln]
    return "; ".join(dict.fromkeys(e for e in errors if e))[:400] or None


def parse(stdout: str, stderr: str, *, failed: bool) -> PluginLog:
    """The facts of one ``apply_plugin_main --cmd=apply`` run (``failed``: it exited non-zero)."""
    parts = _PARTITION.findall(stderr)
    sdk = _SDK.search(stderr)
    left = _left_ops(stderr, _vendor_reasons(stdout))
    notes = tuple(dict.fromkeys(m + "." for m in _SKEW.findall(stderr)))
    total = sum(int(p[2]) for p in parts) if parts else None
    return PluginLog(
        sdk_version=sdk.group(1) if sdk else None,
        ops_total=total,
        ops_selected=sum(int(p[1]) for p in parts) if parts else None,
        partitions=sum(int(p[3]) for p in parts) if parts else None,
        left=left,
        error=_compile_error(stdout, stderr) if failed else None,
        devices=tuple(d for _i, d in _OV_DEVICE.findall(stderr)),
        notes=notes,
    )
