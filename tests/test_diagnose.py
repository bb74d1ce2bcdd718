"""edgebench diagnose: the planted layer is found and fixed; metrics, ranking, worker, outputs.

Real TF conversions and real LiteRT throughout (the planted model is trained on digits at test
time); the ranking and statistics units are also tested on constructed inputs whose answer is known.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest

from edgebench.core.errors import BadInput

pytest_plugins = ["conftest_diagnose"]

LAYER_KEYS = {"rank", "tensor", "op", "node", "shape", "scale", "zero_point", "rmse_over_scale", "snr_db",
              "cosine", "max_abs", "isolated_snr_db", "outlier_ratio"}


def _hostile(name: str) -> bool:
    return "hostile" in name.split(";")[0]


# --------------------------------------------------------------------------- the planted layer


@pytest.fixture(scope="module")
def planted_diagnosis(planted, tmp_path_factory):
    from edgebench.convert.run import ConvertSettings
    from edgebench.diagnose.run import DiagnoseSettings, diagnose

    out = tmp_path_factory.mktemp("diag")
    return diagnose(DiagnoseSettings(
        convert=ConvertSettings(src=str(planted["model"]), precisions=("int8", "fp32"), data=str(planted["cal"]),
                                out_dir=str(out)), data=str(planted["eval"]), eval_samples=120)).to_dict()


def test_int8_collapses_and_the_planted_layer_ranks_first(planted_diagnosis):
    rows = {r["precision"]: r for r in planted_diagnosis["rows"]}
    assert rows["fp32"]["status"] == "skipped" and "nothing is quantized" in rows["fp32"]["error"]
    row = rows["int8"]
    assert row["status"] == "ok"
    assert row["accuracy"]["top1_drop_pp"] > 30, row["accuracy"]          # INT8 accuracy collapses
    top = row["layers"][0]
    assert LAYER_KEYS <= set(top)
    assert top["rank"] == 1 and top["finding"]
    assert "hostile" in top["tensor"] or "consumer" in top["tensor"], top["tensor"]
    hostile = next(l for l in row["layers"] if _hostile(l["tensor"]))
    assert hostile["outlier_ratio"] > 500                                    # ~PLANT_FACTOR
    assert "outliers" in hostile["advice"] and "int16x8" in hostile["advice"]
    assert hostile["channel_snr_db"] < 6 < 30 < hostile["snr_db"]            # the tensor-wide SNR hides it
    consumer = next(l for l in row["layers"] if "consumer" in l["tensor"].split(";")[0])
    assert consumer["rank"] <= 2 and consumer["finding"]
    assert consumer["inherits_from"] == hostile["tensor"]
    assert [t for t in row["suggested_keep_float"] if _hostile(t)]
    # Healthy int8 layers: rounding noise only, ~1/sqrt(12) of a step in isolation.
    healthy = [l["isolated_rmse_over_scale"] for l in row["layers"] if not l["finding"] and l["op"] == "CONV_2D"]
    assert healthy and all(0.2 < r < 0.5 for r in healthy), healthy
    assert row["intermediates"]["quantized"] == "preserve_all_tensors"
    assert row["intermediates"]["quantized_preserve_max_diff"] == 0.0
    assert row["unmatched"] == []
    assert row["memory"]["peak_rss_bytes"] <= row["memory"]["bound_bytes"]
    assert any("--keep-float" in c for c in row["fix_commands"])


@pytest.mark.slow
def test_keep_float_auto_brings_the_drop_under_2pp_and_stays_smaller_than_fp32(planted, tmp_path):
    from edgebench.judge.gate import Thresholds
    from edgebench.convert_and_compare.pipeline import CompareSettings, convert_and_compare
    from edgebench.targets.base import RunControl
    from edgebench.model.tflite_model import inspect

    from edgebench.convert.run import ConvertSettings
    from edgebench.targets.base import RunOptions

    doc = convert_and_compare(CompareSettings(
        convert=ConvertSettings(src=str(planted["model"]), precisions=("fp32", "int8"), data=str(planted["cal"]),
                                out_dir=str(tmp_path), keep_float="auto"),
        data=str(planted["eval"]), run=RunOptions(control=RunControl(runs=50)),
        thresholds=Thresholds(max_accuracy_drop_pp=2.0))).to_dict()
    rows = {r["precision"]: r for r in doc["rows"]}
    int8 = rows["int8"]
    assert int8["accuracy"]["top1_drop_pp"] < 2.0, int8["accuracy"]
    assert int8["size_bytes"] < rows["fp32"]["size_bytes"]
    assert int8["keep_float"] and any(_hostile(t) for t in int8["keep_float"])
    assert doc["gate"]["passed"]
    search = doc["keep_float_search"]
    assert search["met"] and search["candidates"][0]["keep_float"] == []           # plain int8 first
    assert search["candidates"][0]["top1_drop_pp"] > 30
    chosen = [c for c in search["candidates"] if c["chosen"]]
    assert len(chosen) == 1 and chosen[0]["p50_ms"] is not None and chosen[0]["p99_ms"] is not None
    # The .tflite really keeps the planted conv and its consumer float, everything else integer.
    ops = inspect(int8["model_path"])["ops"]
    kinds = {o["output_names"][0].split(";")[0].split("/")[1].rsplit("_", 1)[0]: o["kind"] for o in ops
             if o["op"] == "CONV_2D"}      # layer name from "functional_N/<layer>_M/Relu"
    assert kinds == {"conv1": "integer", "hostile": "float", "consumer": "float"}


def test_keep_float_by_regex_and_names(planted, tmp_path):
    from edgebench.convert.run import ConvertSettings, convert
    from edgebench.convert.quant.keep_float import verify_keep_float

    m = convert(ConvertSettings(src=str(planted["model"]), precisions=("int8",), data=str(planted["cal"]),
                                out_dir=str(tmp_path / "a"), keep_float="hostile"))
    v = m["variants"]["int8"]
    assert v["status"] == "ok", v.get("error")
    assert len(v["keep_float"]) == 1 and _hostile(v["keep_float"][0])
    assert any("consumer" in n for n in v["keep_float_ops"])                # its consumer reads it in float
    assert verify_keep_float(v["path"], v["keep_float_ops"]) == []
    assert v["quantization"]["mode"] == "int8 with float islands"
    assert 0 < v["quantization_coverage"] < 1
    # Exact names (as diagnose lists them) give the same model.
    m2 = convert(ConvertSettings(src=str(planted["model"]), precisions=("int8",), data=str(planted["cal"]),
                                 out_dir=str(tmp_path / "b"), keep_float=",".join(v["keep_float"])))
    assert m2["variants"]["int8"]["keep_float_ops"] == v["keep_float_ops"]
    # Without a denylist the keep-float route gives the plain int8 model's outputs.
    from edgebench.convert.parity import run_tflite_inprocess
    from edgebench.convert.quant.keep_float import quantize_keep_float
    from edgebench.model.inputs import InputSet

    plain = Path(m["variants"]["fp32"]["path"]).with_name("plain.tflite")
    cal = Path(v["calibrated_path"]).read_bytes()
    plain.write_bytes(quantize_keep_float(cal, [])[0])
    ds = InputSet.load(planted["eval"]).take(40)
    ref = convert(ConvertSettings(src=str(planted["model"]), precisions=("int8",), data=str(planted["cal"]),
                                  out_dir=str(tmp_path / "c")))["variants"]["int8"]["path"]
    a, b = run_tflite_inprocess(plain, ds), run_tflite_inprocess(ref, ds)
    assert all(np.array_equal(a[k], b[k]) for k in a)


@pytest.mark.parametrize("spec, message", [
    ("no_such_layer_xyz", "matches no float tensor"),
    ("((", "neither tensor names nor a valid regex"),
])
def test_keep_float_bad_names(planted, tmp_path, spec, message):
    from edgebench.convert.run import ConvertSettings, convert

    with pytest.raises(BadInput, match=message):
        convert(ConvertSettings(src=str(planted["model"]), precisions=("int8",), data=str(planted["cal"]),
                                out_dir=str(tmp_path), keep_float=spec))


def test_keep_float_needs_int8_and_auto_needs_a_goal(planted, tmp_path, run_cli):
    code, _, err = run_cli("convert", str(planted["model"]), "--precision", "fp32,fp16", "--keep-float", "x",
                           "--data", str(planted["cal"]), "--out", str(tmp_path))
    assert code == 2 and "add int8 to --precision" in err
    code, _, err = run_cli("convert", str(planted["model"]), "--precision", "int8", "--keep-float", "auto",
                           "--data", str(planted["cal"]), "--out", str(tmp_path))
    assert code == 2 and "--keep-float auto needs a goal" in err and "Traceback" not in err
    code, _, err = run_cli("convert", str(planted["model"]), "--max-accuracy-drop", "1", "--data", str(planted["cal"]))
    assert code == 2 and "goal of --keep-float auto" in err


def test_convert_keep_float_auto_on_a_healthy_model_keeps_plain_int8(digits_model, tmp_path, run_cli):
    code, out, err = run_cli("convert", "digits", "--precision", "fp32,int8", "--keep-float", "auto",
                             "--max-accuracy-drop", "1", "--out", str(tmp_path))
    assert code == 0, err
    flat = " ".join(out.split())
    assert "keep-float search (goal: top-1 drop <= 1 pp; met" in flat and "none (plain int8)" in flat
    v = json.loads((tmp_path / "manifest.json").read_text())["variants"]["int8"]
    assert v["keep_float"] == [] and v["quantization"]["mode"] == "full-integer"
    assert v["keep_float_search"]["candidates"][0]["chosen"]


def test_gate_failure_points_to_diagnose(planted, tmp_path, run_cli):
    code, _, err = run_cli("convert-and-compare", str(planted["model"]), "--precision", "fp32,int8",
                           "--data", str(planted["eval"]), "--calibration-data", str(planted["cal"]),
                           "--runs", "20", "--max-accuracy-drop", "1", "--out", str(tmp_path), "--no-store")
    assert code == 1, err
    flat = " ".join(err.split())
    assert "gate failed: int8 on host: top-1 drop" in flat
    assert (f"find the layer: edgebench diagnose {planted['model']} --precision int8 --data {planted['eval']} "
            f"--calibration-data {planted['cal']}") in flat


# --------------------------------------------------------------------------- precisions and inputs


@pytest.mark.slow
def test_int16x8_end_to_end(digits_model, tmp_path, run_cli):
    from edgebench.judge.gate import load_gate_file
    from edgebench.model.tflite_model import inspect

    gate = tmp_path / "gate.yaml"
    gate.write_text("int16x8:\n  max_accuracy_drop: 2.0\n")
    assert load_gate_file(gate)["int16x8"].max_accuracy_drop_pp == 2.0
    for io in ("float", "int8"):
        code, out, err = run_cli("convert-and-compare", "digits", "--precision", "fp32,int16x8", "--int8-io", io,
                                 "--runs", "30", "--gate", str(gate), "--out", str(tmp_path / io), "--json", "-",
                                 "--no-store")
        assert code == 0, err
        row = next(r for r in json.loads(out)["rows"] if r["precision"] == "int16x8")
        assert row["status"] == "ok" and row["accuracy"]["top1_drop_pp"] <= 2.0
        info = inspect(row["model_path"])
        assert "int16" in {o for op in info["ops"] for o in op["outputs"]}
        if row["delegation"] and row["delegation"]["nodes_delegated"] == 0:     # issue 24.11: the real cause
            assert any("no int16x8 (16-bit activation) kernels" in w for w in row["warnings"])
            assert not any("left on the CPU interpreter" in w for w in row["warnings"]), row["warnings"]
        assert info["inputs"][0]["dtype"] == ("int16" if io == "int8" else "float32")
    # diagnose reads int16 activations too
    from edgebench.convert.run import ConvertSettings
    from edgebench.diagnose.run import DiagnoseSettings, diagnose

    doc = diagnose(DiagnoseSettings(convert=ConvertSettings(src="digits", precisions=("int16x8",),
                                                            out_dir=str(tmp_path / "d")), eval_samples=20)).to_dict()
    row = doc["rows"][0]
    assert row["status"] == "ok" and row["layers"] and row["layers"][0]["dtype"] == "int16"
    assert all((l["isolated_snr_db"] or 0) > 35 for l in row["layers"] if l["op"] == "CONV_2D")


def test_matrix_accepts_int16x8(tmp_path):
    from edgebench.matrix.run import expand, load_matrix

    p = tmp_path / "m.yaml"
    p.write_text("models: [digits]\nprecisions: [int8, int16x8]\n")
    cells = expand(load_matrix(str(p)))
    assert [c.params["precisions"] for c in cells] == ["int8,int16x8"]
    p.write_text("models: [digits]\nprecisions: [int4]\n")
    with pytest.raises(BadInput, match="int16x8"):
        load_matrix(str(p))


def test_fp32_alone_says_nothing_is_quantized(run_cli):
    code, _, err = run_cli("diagnose", "digits", "--precision", "fp32", "--no-store")
    assert code == 2 and "quantizes nothing" in err and "Traceback" not in err


def test_token_id_model(small_savedmodels, tmp_path):
    from edgebench.convert.run import ConvertSettings
    from edgebench.diagnose.run import DiagnoseSettings, diagnose

    ids = np.random.default_rng(0).integers(0, 50, size=(64, 5)).astype(np.int32)
    np.savez(tmp_path / "ids.npz", ids=ids)
    doc = diagnose(DiagnoseSettings(
        convert=ConvertSettings(src=str(small_savedmodels["tokens"]), precisions=("int8", "dynamic"),
                                data=str(tmp_path / "ids.npz"), out_dir=str(tmp_path / "o")),
        data=str(tmp_path / "ids.npz"), eval_samples=32)).to_dict()
    for row in doc["rows"]:
        assert row["status"] == "ok", row.get("error")
        assert row["layers"] and row["accuracy"]["top1_agreement"] is not None
        assert "GATHER" in {l["op"] for l in row["layers"]} or row["precision"] == "dynamic"


def test_bad_model_file_is_bad_input(tmp_path):
    from edgebench.convert.quant.layers import run_worker

    bad = tmp_path / "bad.tflite"
    bad.write_bytes(b"not a flatbuffer at all")
    np.savez(tmp_path / "x.npz", x=np.zeros((2, 3), np.float32))
    with pytest.raises(BadInput, match="not a TFLite flatbuffer"):
        run_worker(bad, bad, tmp_path / "x.npz", samples=2)


# --------------------------------------------------------------------------- worker mechanics


def test_single_op_models_reproduce_each_op_and_exposed_outputs_match_preserve(planted_diagnosis):
    """Each op alone, fed the quantized model's own inputs, gives that model's output bit for bit;
    reading intermediates as extra outputs (the LiteRT#413 fallback) gives the preserved values."""
    from ai_edge_litert.interpreter import Interpreter, OpResolverType

    from edgebench.convert.quant import tensor_worker as w
    from edgebench.model import tflite_rewrite as rw

    row = next(r for r in planted_diagnosis["rows"] if r["precision"] == "int8")
    raw = Path(row["model_path"]).read_bytes()
    kw = {"experimental_op_resolver_type": OpResolverType.BUILTIN_WITHOUT_DEFAULT_DELEGATES}
    tap = Interpreter(model_content=raw, experimental_preserve_all_tensors=True, **kw)
    tap.allocate_tensors()
    g = w.Graph.from_interpreter(tap)
    x = np.load(Path(planted_diagnosis["inputs"]["path"]))["image"][:1]
    tap.set_tensor(g.inputs[0], x)
    tap.invoke()
    model_t = rw.load_model_t(raw)
    checked = 0
    for o in g.ops:
        content, ins, outs = rw.single_op_model(model_t, raw, o["index"])
        it = Interpreter(model_content=content, **kw)
        it.allocate_tensors()
        for t, d in zip(ins, sorted(it.get_input_details(), key=lambda d: d["index"])):
            it.set_tensor(d["index"], tap.get_tensor(t))
        it.invoke()
        for t, d in zip(outs, sorted(it.get_output_details(), key=lambda d: d["index"])):
            assert np.array_equal(it.get_tensor(d["index"]), tap.get_tensor(t)), o
        checked += 1
    assert checked == len(g.ops)
    exposed = Interpreter(model_content=rw.expose_outputs(model_t, [t for t in g.activations()]), **kw)
    exposed.allocate_tensors()
    exposed.set_tensor(g.inputs[0], x)
    exposed.invoke()
    for t in g.activations():
        assert np.array_equal(exposed.get_tensor(t), tap.get_tensor(t))


def test_match_tensors_lists_what_it_cannot_match():
    from edgebench.convert.quant.tensor_worker import Graph, match_tensors

    def t(i, name, shape, dtype="float32", scale=None):
        return i, {"index": i, "name": name, "shape": np.array(shape), "dtype": np.dtype(dtype),
                   "quantization_parameters": {"scales": np.array([scale] if scale else []),
                                               "zero_points": np.array([0] if scale else [])}}

    def graph(tensors, ops, inputs, outputs):
        g = Graph(dict(tensors), ops, inputs, outputs)
        for o in ops:
            for x in o["outputs"]:
                g.producer[x] = o["index"]
            for x in o["inputs"]:
                g.consumers.setdefault(x, []).append(o["index"])
        return g

    fg = graph([t(0, "in", [1, 4]), t(1, "a", [1, 4]), t(2, "b", [1, 4])],
               [{"index": 0, "op": "RELU", "inputs": [0], "outputs": [1]},
                {"index": 1, "op": "TANH", "inputs": [1], "outputs": [2]}], [0], [2])
    qg = graph([t(0, "in", [1, 4]), t(1, "q", [1, 4], "int8", 0.1), t(2, "a", [1, 4], "int8", 0.1),
                t(3, "renamed", [1, 4], "int8", 0.1), t(4, "extra", [1, 4], "int8", 0.1)],
               [{"index": 0, "op": "QUANTIZE", "inputs": [0], "outputs": [1]},
                {"index": 1, "op": "RELU", "inputs": [1], "outputs": [2]},
                {"index": 2, "op": "TANH", "inputs": [2], "outputs": [3]},
                {"index": 3, "op": "LOGISTIC", "inputs": [3], "outputs": [4]}], [0], [4])
    match, unmatched = match_tensors(fg, qg)
    assert match[2] == (1, "name") and match[1] == (0, "requantize") and match[3] == (2, "op order")
    assert [u["tensor"] for u in unmatched] == ["extra"] and unmatched[0]["op"] == "LOGISTIC"


def test_uniform_rounding_gives_one_over_sqrt12_and_outliers_are_measured():
    from edgebench.convert.quant.layers import NOISE_RATIO
    from edgebench.convert.quant.tensor_worker import ErrorStats, RangeStats

    rng = np.random.default_rng(0)
    st, step = ErrorStats(), 0.05
    for _ in range(20):
        ref = rng.uniform(-3, 3, size=(1, 8, 8, 16))
        st.add(np.round(ref / step) * step, ref)
    assert abs(st.to_dict()["rmse"] / step - NOISE_RATIO) < 0.01
    assert NOISE_RATIO == pytest.approx(0.2887, abs=1e-4)
    r, plain = RangeStats(), RangeStats()
    for _ in range(10):
        x = rng.normal(size=(1, 6, 6, 16)).astype(np.float32)
        plain.add(x)
        x[..., 3] *= 1000.0
        r.add(x)
    d = r.to_dict()
    assert d["outlier_channel"] == 3 and 500 < d["outlier_ratio"] < 2000   # ~the 1000x planted
    assert plain.to_dict()["outlier_ratio"] < 3


def _entry(i, snr, *, inputs=(), scale=0.1, ratio=1.5, rmse=None, iso=True):
    stats = {"rmse": rmse if rmse is not None else 0.03, "snr_db": snr, "channel_snr_db": snr, "cosine": 1.0,
             "max_abs": 0.1, "nonfinite": 0}
    return {"tensor": f"t{i}", "float_tensor": f"t{i}", "index": i, "op": "CONV_2D", "node": i, "shape": [1, 4, 4, 8],
            "dtype": "int8", "scale": scale, "zero_point": 0, "match": "name", "input_indices": list(inputs),
            "accumulated": stats, "isolated": stats if iso else None,
            "range": {"min": 0.0, "max": 1.0, "outlier_ratio": ratio, "outlier_channel": 2}}


def test_ranking_rule_cause_first_findings_and_advice():
    from edgebench.convert.quant.layers import rank_layers, suggest_keep_float

    entries = [_entry(0, 40), _entry(1, 41, inputs=[0]), _entry(2, 2.0, inputs=[1], ratio=3000),
               _entry(3, 1.5, inputs=[2]), _entry(4, 39, inputs=[3]), _entry(5, 42, inputs=[4]),
               {**_entry(6, 0, inputs=[5]), "op": "INPUT"}]
    layers = rank_layers(entries)
    assert [l["tensor"] for l in layers[:2]] == ["t2", "t3"]        # the cause, then what inherits from it
    assert layers[1]["inherits_from"] == "t2" and "inherits its error from input" in layers[1]["advice"]
    assert "activation outliers in channel 2" in layers[0]["advice"]
    assert [l["finding"] for l in layers] == [True, True, False, False, False, False]
    assert all(l["z"] < 3.5 for l in layers[2:])
    assert "t6" not in {l["tensor"] for l in layers}                  # graph inputs are not layers
    assert suggest_keep_float(layers, "int8") == ["t2"] and suggest_keep_float(layers, "fp16") == []
    assert "healthy" in layers[-1]["advice"]


def test_clipping_advice():
    from edgebench.convert.quant.layers import rank_layers

    e = [_entry(i, 40) for i in range(6)] + [_entry(6, 5)]
    e[-1]["range"] = {"min": 0.0, "max": 30.0, "outlier_ratio": 2.0, "outlier_channel": 0}   # int8 max 12.7
    layers = rank_layers(e)
    assert layers[0]["tensor"] == "t6" and layers[0]["advice"].startswith("clipping")


# --------------------------------------------------------------------------- outputs


def test_cli_writes_json_html_markdown_model_explorer_and_stores(digits_model, tmp_path, run_cli):
    from edgebench.store.db import Store
    from edgebench.model.tflite_model import inspect

    args = ["diagnose", "digits", "--precision", "int8", "--samples", "24", "--out", str(tmp_path / "o"),
            "--json", str(tmp_path / "d.json"), "--html", str(tmp_path / "d.html"), "--markdown",
            str(tmp_path / "d.md"), "--model-explorer", str(tmp_path / "me.json"), "--db", str(tmp_path / "r.db")]
    code, out, err = run_cli(*args)
    assert code == 0, err
    doc = json.loads((tmp_path / "d.json").read_text())
    assert doc["kind"] == "diagnose" and doc["schema_version"] and doc["run_id"]
    row = doc["rows"][0]
    assert "suggested_keep_float" in row and row["layers"]
    assert all(LAYER_KEYS <= set(l) for l in row["layers"])
    assert [l["rank"] for l in row["layers"]] == list(range(1, len(row["layers"]) + 1))
    assert "edgebench diagnose: digits-tiny int8" in " ".join(out.split())
    with Store(str(tmp_path / "r.db")) as st:
        assert st.get(doc["run_id"])["kind"] == "diagnose"
    text = (tmp_path / "d.html").read_text()
    assert 'id="diagnose"' in text and "error along the graph" in text and "<svg" in text
    md = (tmp_path / "d.md").read_text()
    assert md.startswith("### edgebench diagnose") and "| rank | op#node |" in md
    data = json.loads((tmp_path / "me.json").read_text())
    names = {n for o in inspect(row["model_path"])["ops"] for n in o["output_names"]}
    assert set(data) >= {"results", "gradient"} and data["results"]
    assert set(data["results"]) <= names            # keyed by op output tensor names of that .tflite
    assert all(isinstance(v["value"], (int, float)) and math.isfinite(v["value"]) for v in data["results"].values())
    assert data["gradient"][0]["stop"] == 0 and data["gradient"][-1]["stop"] == 1


def test_markdown_escapes_tensor_names():
    from edgebench.report.markdown import render_markdown

    layer = {"rank": 1, "op": "ADD", "node": 3, "tensor": "a|b<script>", "scale": 0.1, "finding": True,
             "advice": "x|y"}
    doc = {"kind": "diagnose", "rows": [{"precision": "int8", "status": "ok", "model": "m", "layers": [layer]}]}
    md = render_markdown(doc)
    assert "a\\|b&lt;script&gt;" in md and "<script>" not in md and "x\\|y" in md


def test_unused_range_and_fp16_saturation_advice():
    from edgebench.convert.quant.layers import rank_layers

    e = [_entry(i, 40) for i in range(6)] + [_entry(6, 0.0, scale=3.9e6)]
    e[-1]["range"] = {"min": -0.06, "max": 0.07, "outlier_ratio": 2.0, "outlier_channel": 0}   # a mask-sized grid
    assert rank_layers(e)[0]["advice"].startswith("range far wider than the values")
    f = [{**_entry(i, 90, scale=None), "dtype": "float32"} for i in range(6)]
    f.append({**_entry(6, 0.0, scale=None), "dtype": "float32",
              "range": {"min": -1e9, "max": 0.07, "outlier_ratio": 1.0, "outlier_channel": 0}})
    f.append({**_entry(7, 70, scale=None), "dtype": "float32"})
    layers = rank_layers(f, "fp16")
    assert layers[0]["tensor"] == "t6" and "float16's ±65504" in layers[0]["advice"]
    assert not next(l for l in layers if l["tensor"] == "t7")["finding"]   # 70 dB: past any int8 layer


@pytest.mark.slow
def test_tiny_bert_attention_scores_share_the_mask_range(tmp_path):
    """A real finding on a reference model: int8 gives the attention scores the range of the -1e9
    mask constant (SELECT_V2 shares one scale), so every score rounds to one level."""
    from edgebench.convert.run import ConvertSettings
    from edgebench.diagnose.run import DiagnoseSettings, diagnose

    doc = diagnose(DiagnoseSettings(convert=ConvertSettings(src="bert", precisions=("int8", "fp16"), out_dir=str(tmp_path)),
                                    eval_samples=8, fix_trials=0)).to_dict()   # the layer's own numbers (no trials)
    rows = {r["precision"]: r for r in doc["rows"]}
    top = rows["int8"]["layers"][0]
    assert top["op"] == "BATCH_MATMUL" and top["finding"] and top["isolated_snr_db"] < 3
    assert top["advice"].startswith("range far wider than the values")
    assert top["float_tensor"] in rows["int8"]["suggested_keep_float"]
    fp16 = rows["fp16"]["layers"]
    assert all(l["isolated_skipped"] is None for l in fp16)       # fp16 weights fed from the graph itself
    assert "float16's ±65504" in fp16[0]["advice"]


def test_keep_float_search_stops_when_no_candidate_moves_the_metric(digits_model, tmp_path, run_cli):
    """Issue 28.6: a goal no candidate gets closer to ends the search with the reason, not after
    every candidate; here the goal is beyond float itself."""
    from edgebench.convert.quant.search import KeepFloatGoal, _moved

    goal = KeepFloatGoal(min_psnr_db=300.0)
    assert _moved({"psnr_db": 55.0}, {"psnr_db": 64.9}, goal)
    assert not _moved({"psnr_db": 147.47}, {"psnr_db": 147.47}, goal)
    code, out, err = run_cli("convert", "digits", "-p", "int8", "--keep-float", "auto", "--min-psnr", "300",
                             "--out", str(tmp_path / "o"))
    assert (tmp_path / "o" / "manifest.json").exists(), out + err
    search = json.loads((tmp_path / "o" / "manifest.json").read_text())["variants"]["int8"]["keep_float_search"]
    assert not search["met"]
    stopped = search["stopped_early"]
    assert stopped and "moved the metric by less than 0.5 dB" in stopped and "out of reach" in stopped, stopped
    steps = len(search["candidates"]) - 1
    psnr = [c["psnr_db"] for c in search["candidates"]]
    assert all(abs(p - psnr[-1]) < 0.5 for p in psnr[-3:]) and steps >= 2      # two stalled steps, then stop
    assert "stopped after" in out


# --------------------------------------------------------------------------- issue 24.10: advice that runs


def test_advice_names_whole_float_tensors_and_only_keepable_ones():
    """A --keep-float in advice names the whole float tensor, quoted (a …-shortened name is refused
    by --keep-float); an int8-only tensor (a final SOFTMAX's output) and a non-int8 precision get no
    --keep-float at all, nor does a source that cannot be re-quantized (QAT)."""
    import shlex

    from edgebench.convert.quant.layers import advice

    long_name = "functional_1/" + "block_" * 20 + "conv/Relu;functional_1/other/BiasAdd"
    layer = {"tensor": "q", "float_tensor": long_name, "op": "CONV_2D", "finding": True, "scale": 0.1, "dtype": "int8",
             "zero_point": 0, "ranking_snr_db": 10.0, "isolated_rmse_over_scale": 3.0, "float_min": -1.0,
             "float_max": 1.0}
    text = advice(layer, precision="int8")
    assert f"--keep-float {shlex.quote(long_name)}" in text and "…" not in text
    assert "--keep-float" not in advice({**layer, "float_tensor": None}, precision="int8")      # int8-only tensor
    assert "--keep-float" not in advice(layer, precision="dynamic")
    assert "--keep-float" not in advice(layer, precision="int8", keep_float=False)


def test_prove_it_goals_are_stricter_than_plain_int8_and_qat_gets_none():
    from edgebench.convert.run import ConvertSettings
    from edgebench.diagnose.run import DiagnoseSettings, fix_commands, proof_goal

    assert proof_goal({"accuracy": {"top1_drop_pp": 0.8}}) == ["--max-accuracy-drop", "0.4"]
    assert proof_goal({"accuracy": {"top1_drop_pp": 0.0}, "worst": {"psnr_db": 55.2}}) == ["--min-psnr", "61"]
    assert proof_goal({"worst": {"psnr_db": "inf"}}) is None           # float-exact: nothing to prove
    row = {"status": "ok", "precision": "int8", "worst": {"psnr_db": 31.0}, "suggested_keep_float": ["t"]}
    cmds = fix_commands(DiagnoseSettings(convert=ConvertSettings(src="m")), row)
    assert cmds and all("--min-psnr 37" in c for c in cmds)          # BERT: plain int8 met the old fixed 30 dB
    assert fix_commands(DiagnoseSettings(convert=ConvertSettings(src="m")), row, qat=True) == []
