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


# --------------------------------------------------------------------------- crafted .pt2 archives (issue 42)
# Each archive below is built from torch.export.save's own output and rewritten so that torch 2.13's
# loader reads a code-carrying pickle (``_Planted``) where a check of the archive by other means
# would read something else. ``live``: torch.export.load of it really runs the pickle (checked first,
# so a test whose archive no longer fools torch fails instead of passing for the wrong reason).


def _members(path: Path) -> list[tuple[str, bytes]]:
    import zipfile

    with zipfile.ZipFile(path) as z:
        return [(i.filename, z.read(i)) for i in z.infolist()]


def _write(path: Path, members: list[tuple[str, bytes]]) -> Path:
    import warnings
    import zipfile

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")             # "Duplicate name": what the craft is for
        with zipfile.ZipFile(path, "w") as z:
            for name, data in members:
                z.writestr(name, data)
    return path


def _pickled_weight(members: list[tuple[str, bytes]], path_name: str) -> tuple[list[tuple[str, bytes]], str]:
    """The members with the first weight's payload entry marked pickled and renamed ``path_name``."""
    out, fqn = [], None
    for name, data in members:
        if name.endswith("_weights_config.json"):
            cfg = json.loads(data)
            fqn = next(iter(cfg["config"]))
            cfg["config"][fqn].update(path_name=path_name, use_pickle=True)
            data = json.dumps(cfg).encode()
        out.append((name, data))
    return out, fqn


def _tensor_pickle() -> bytes:
    import io

    import torch

    buf = io.BytesIO()
    torch.save(torch.zeros(2), buf)
    return buf.getvalue()


def _craft_absolute(src, evil):
    """'/w': a check reading root + 'data/weights/' + name sees a plain tensor; torch's
    os.path.join('data/weights/', '/w') reads root + '/w', the pickle."""
    members, _ = _pickled_weight(_members(src), "/w")
    root = members[0][0].split("/")[0]
    return members + [(f"{root}/data/weights//w", _tensor_pickle()), (f"{root}//w", evil)], "'/w'"


def _craft_dotdot(src, evil):
    members, _ = _pickled_weight(_members(src), "../w")
    root = members[0][0].split("/")[0]
    return members + [(f"{root}/data/weights/../w", evil)], "data/weights/../w"


def _craft_two_roots(src, evil):
    """A second, complete root ahead of the real one: torch's reader takes the first member's folder."""
    members = _members(src)
    root = members[0][0].split("/")[0]
    decoy = [(name.replace(root + "/", "evil/", 1), evil if name.endswith("sample_inputs/model.pt") else data)
             for name, data in members]
    return decoy + members, "2 archive roots"


def _craft_pickled_weight(src, evil):
    """A weight marked pickled (torch unpickles it with weights_only=False) whose member is code."""
    members, fqn = _pickled_weight(_members(src), "weight_0")
    return [(n, evil if n.endswith("data/weights/weight_0") else d) for n, d in members], \
        f"data/weights/weight_0 (pickled {fqn!r})"


def _craft_case(src, evil):
    """Sample inputs stored as MODEL.PT: torch's reader finds 'model.pt' ignoring case."""
    return [(n.replace("model.pt", "MODEL.PT") if n.endswith("sample_inputs/model.pt") else n,
             evil if n.endswith("sample_inputs/model.pt") else d) for n, d in _members(src)], \
        "data/sample_inputs/model.pt"


def _craft_case_twin(src, evil, evil_first: bool = True):
    """weight_0 (a plain tensor, what an exact-name check reads) beside WEIGHT_0 (code): torch's
    case-blind binary search finds one of the two, which one depending on the directory -- the
    test keeps the order (``evil_first`` or not) that makes it the code."""
    members, _ = _pickled_weight(_members(src), "weight_0")
    out = []
    for n, d in members:
        if n.endswith("data/weights/weight_0"):
            pair = [(n.replace("weight_0", "WEIGHT_0"), evil), (n, _tensor_pickle())]
            out += pair if evil_first else pair[::-1]
        else:
            out.append((n, d))
    return out, "the same name but for case"


def _craft_top_level(src, evil):
    """The older format at the top of the archive: torch's reader refuses a member outside a folder,
    and torch.export.load falls back to the older loader, which unpickles the state dict whole."""
    from torch._export.serde.schema import SCHEMA_VERSION

    program = next(d for n, d in _members(src) if n.endswith("models/model.json"))
    return [("archive_version", b"0"), ("version", ".".join(map(str, SCHEMA_VERSION)).encode()),
            ("serialized_exported_program.json", program), ("serialized_state_dict.pt", _tensor_pickle()),
            ("serialized_constants.pt", evil), ("serialized_example_inputs.pt", _tensor_pickle())], \
        "'archive_version' lies at the top"


CRAFTS = {  # name: (craft, torch.export.load runs the pickle)
    "absolute-path-name": (_craft_absolute, True),
    "dotdot-path-name": (_craft_dotdot, True),
    "two-roots": (_craft_two_roots, False),      # torch 2.13 refuses a member outside its root itself
    "pickled-weight": (_craft_pickled_weight, True),
    "case-only-name": (_craft_case, True),
    "names-equal-but-for-case": (_craft_case_twin, True),
    "top-level-older-format": (_craft_top_level, True),
}


@pytest.mark.parametrize("craft", list(CRAFTS))
def test_crafted_pt2_is_refused_naming_the_member(torch_setup, run_cli, tmp_path, craft):
    """Issue 42: the members checked are the members torch loads. Each archive is live (torch runs its
    pickle) and convert-and-compare refuses it with one line naming the member: exit 2, no marker."""
    import pickle

    import torch

    d = torch_setup
    marker = tmp_path / "ran"
    make, live = CRAFTS[craft]
    code_pickle = pickle.dumps(_Planted(str(marker)), protocol=2)
    variants = [{"evil_first": True}, {"evil_first": False}] if make is _craft_case_twin else [{}]
    for kw in variants:
        members, named = make(d / "net.pt2", code_pickle, **kw)
        evil = _write(tmp_path / f"{craft}.pt2", members)
        if not live:
            break
        with pytest.raises(Exception):          # noqa: B017 -- whatever torch says after the pickle ran
            torch.export.load(str(evil))
        if marker.exists():
            break
    if live:
        assert marker.read_text() == "pwned", "the crafted archive no longer fools torch.export.load"
        marker.unlink()
    code, out, err = run_cli("convert-and-compare", str(evil), "-p", "fp32", "--data", str(d / "nchw.npz"),
                             "--no-store", "--out", str(tmp_path / "out"))
    lines = [ln for ln in err.strip().splitlines() if ln.strip()]
    assert code == 2, err
    assert not marker.exists() and not list(tmp_path.rglob("ran"))
    assert "Traceback" not in err and len(lines) == 1, err
    assert named in lines[0] and str(evil) in lines[0], lines[0]
