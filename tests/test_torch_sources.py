"""PyTorch sources (issue 38): ``--torch MODULE:FACTORY`` and a saved ``torch.export`` program
(``.pt2``) convert through litert-torch; the FP32 parity check and the drift reference are
PyTorch's own outputs; integer precisions come from ai-edge-quantizer. Needs the [torch] extra.

One conversion per source form (litert-torch's import alone takes ~13 s here)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pytest

pytestmark = pytest.mark.extras
HERE = Path(__file__).parent
SHAPE = (1, 3, 16, 16)


@pytest.fixture(scope="module")
def torch_setup(tmp_path_factory):
    from conftest import require_extra

    torch = require_extra("torch", "torch")
    require_extra("litert_torch", "torch")
    if str(HERE) not in sys.path:
        sys.path.insert(0, str(HERE))
    import torch_models

    d = tmp_path_factory.mktemp("torch")
    rng = np.random.default_rng(0)
    nchw = rng.uniform(0, 1, size=(48, *SHAPE[1:])).astype(np.float32)
    np.savez(d / "nchw.npz", image=nchw, labels=rng.integers(0, 10, 48))
    np.savez(d / "nhwc.npz", image=np.ascontiguousarray(nchw.transpose(0, 2, 3, 1)))
    program = torch.export.export(torch_models.make_net(), (torch.zeros(SHAPE),))
    torch.export.save(program, str(d / "net.pt2"))
    return d


def test_module_factory_converts_with_torch_as_the_parity_reference(torch_setup, run_cli):
    d = torch_setup
    code, out, err = run_cli("convert", "--torch", "torch_models:make_net", "--input-shape", "image:1,3,16,16",
                             "-p", "fp32,int8", "--data", str(d / "nchw.npz"), "--out", str(d / "factory"),
                             "--json", "-")
    assert code == 0, err
    m = json.loads(out)
    assert m["source"]["kind"] == "torch" and m["source"]["info"]["torch"]["source"] == "factory"
    assert m["parity"]["passed"] and m["parity"]["reference"] == "torch"
    assert m["parity"]["outputs"]["output_0"]["max_abs_err"] <= 1e-6
    assert m["variants"]["int8"]["precision_from_tensors"] == "int8"
    assert m["versions"]["litert_torch"] and m["versions"]["ai_edge_quantizer"]
    from edgebench.sources.resolve import tflite_signature

    sig = tflite_signature(m["variants"]["fp32"]["path"])
    assert sig.input_names == ["image"]                 # the model's own input name, not args_0


def test_pt2_channels_last_convert_and_compare_against_torch(torch_setup, run_cli):
    d = torch_setup
    code, out, err = run_cli("convert-and-compare", str(d / "net.pt2"), "--channels-last", "-p", "fp32,int8",
                             "--data", str(d / "nhwc.npz"), "--samples", "32", "--runs", "50", "--no-store",
                             "--json", "-", "--out", str(d / "pt2"))
    assert code == 0, err
    doc = json.loads(out)
    ref = doc["reference"]
    assert ref["precision"] == "torch" and ref["target"].startswith("torch") and ref["latency_ms"]["samples"] > 0
    rows = {r["precision"]: r for r in doc["rows"]}
    assert rows["fp32"]["drift"]["output_0"]["max_abs"] <= 1e-6       # against PyTorch's own outputs
    assert doc["parity"]["reference"] == "torch" and doc["parity"]["passed"]
    assert rows["int8"]["status"] == "ok" and rows["int8"]["worst"]["cosine"] > 0.9
    from edgebench.model.tflite_model import inspect

    info = inspect(rows["fp32"]["model_path"])
    assert info["inputs"][0]["shape"][-1] == 3                        # NHWC in, no leading TRANSPOSE
    assert info["ops"][0]["op"] != "TRANSPOSE"


def test_diagnose_a_torch_source_names_torch_as_reference(torch_setup, run_cli):
    d = torch_setup
    code, out, err = run_cli("diagnose", "--torch", "torch_models:make_net", "--input-shape", "image:1,3,16,16",
                             "--data", str(d / "nchw.npz"), "--samples", "16", "--no-store", "--json", "-",
                             "--out", str(d / "diag"))
    assert code == 0, err
    doc = json.loads(out)
    assert doc["reference"]["precision"] == "torch"
    (row,) = doc["rows"]
    assert row["status"] == "ok" and row["layers"] and row["float_model_path"].endswith("_fp32.tflite")
    for cmd in row["fix_commands"]:                   # re-names the model as given: runs as printed
        assert "--torch torch_models:make_net --input-shape image:1,3,16,16" in cmd and "auto" not in cmd


def _repack(src: Path, dst: Path, replace: dict[str, bytes]) -> None:
    """A copy of a .pt2 archive with some members' bytes replaced (matched by name suffix)."""
    import zipfile

    with zipfile.ZipFile(src) as zin, zipfile.ZipFile(dst, "w") as zout:
        for info in zin.infolist():
            data = next((b for suffix, b in replace.items() if info.filename.endswith(suffix)), None)
            zout.writestr(info, zin.read(info) if data is None else data)


class _Planted:
    """Unpickling this writes a marker file: what a crafted .pt2 could do on torch.export.load."""

    def __init__(self, path: str):
        self.path = path

    def __reduce__(self):
        return (Path.write_text, (Path(self.path), "pwned"))


def test_pt2_with_a_code_carrying_pickle_is_refused_without_consent(torch_setup, run_cli, tmp_path):
    """Issue 39 for PyTorch sources: torch.export.load falls back to a full unpickle of a .pt2's
    sample inputs when the restricted loader refuses them, so a crafted member runs code on load."""
    import pickle

    d = torch_setup
    marker = tmp_path / "ran"
    evil = tmp_path / "evil.pt2"
    _repack(d / "net.pt2", evil, {"data/sample_inputs/model.pt": pickle.dumps(_Planted(str(marker)))})
    code, out, err = run_cli("convert", str(evil), "-p", "fp32", "--data", str(d / "nchw.npz"),
                             "--out", str(tmp_path / "out"))
    assert code == 2 and not marker.exists()
    line = err.strip().splitlines()[-1]
    assert "data/sample_inputs/model.pt" in line and "--trust-model" in line and "Traceback" not in err
    # a plain program passes the same check (the other tests convert net.pt2 without the flag), and
    # with consent the loader runs as PyTorch would: the pickle's code runs
    run_cli("convert", str(evil), "-p", "fp32", "--data", str(d / "nchw.npz"), "--out", str(tmp_path / "out2"),
            "--trust-model")
    assert marker.read_text() == "pwned"


def test_pt2_constant_holding_a_python_object_is_refused(torch_setup, tmp_path):
    import json as _json
    import zipfile

    from edgebench.core.errors import BadInput
    from edgebench.sources.pytorch import check_pt2

    d = torch_setup
    with zipfile.ZipFile(d / "net.pt2") as z:
        cfg_name = next(n for n in z.namelist() if n.endswith("_constants_config.json"))
    crafted = tmp_path / "opaque.pt2"
    _repack(d / "net.pt2", crafted, {cfg_name: _json.dumps(
        {"config": {"blob": {"path_name": "opaque_obj_0", "is_param": False, "use_pickle": True}}}).encode()})
    with pytest.raises(BadInput, match="constant 'blob' is a pickled Python"):
        check_pt2(crafted, trusted=False)
    check_pt2(crafted, trusted=True)            # consent: only the archive bounds apply
    check_pt2(d / "net.pt2", trusted=False)     # torch.export.save's own output passes
