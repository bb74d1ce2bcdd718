"""Self-contained HTML report (edgebench.report.html) and `edgebench report` from a real store."""

from __future__ import annotations

import re
from html.parser import HTMLParser

import pytest

pytest.register_assert_rewrite("conftest_report")
from conftest_report import make_bench_doc, make_compare_doc, make_train_doc, run_cli  # noqa: E402
from edgebench.report.html import SECTIONS, pareto_front, render_html
from edgebench.report.html_parts import nice_ticks  # noqa: E402

pytest_plugins = ["conftest_report"]

_VOID = {"meta", "br", "hr", "img", "input", "link", "area", "base", "col", "embed", "source", "track", "wbr"}
_SVG_LEAF = {"line", "polyline", "rect", "circle", "path"}


class Structure(HTMLParser):
    """Collects sections, svgs, every URL-bearing attribute and checks tags are balanced."""

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.stack: list[str] = []
        self.sections: list[str] = []
        self.urls: list[tuple[str, str, str]] = []
        self.tags: list[str] = []
        self.svgs = 0
        self.current_section = None
        self.svgs_in: dict[str, int] = {}
        self.text: list[str] = []

    def handle_starttag(self, tag, attrs):
        self.tags.append(tag)
        a = dict(attrs)
        for k, v in attrs:
            if k in ("src", "href", "xlink:href", "action", "srcset", "data", "poster", "background") or \
                    (v and re.search(r"url\(", v or "")):
                self.urls.append((tag, k, v or ""))
        if tag == "section":
            self.sections.append(a.get("id"))
            self.current_section = a.get("id")
        if tag == "svg":
            self.svgs += 1
            self.svgs_in[self.current_section] = self.svgs_in.get(self.current_section, 0) + 1
        if tag not in _VOID:
            self.stack.append(tag)

    def handle_startendtag(self, tag, attrs):
        self.tags.append(tag)
        for k, v in attrs:
            if k in ("src", "href", "xlink:href"):
                self.urls.append((tag, k, v or ""))

    def handle_endtag(self, tag):
        if tag in _VOID:
            return
        assert self.stack and self.stack[-1] == tag, f"unbalanced </{tag}>, open: {self.stack[-5:]}"
        self.stack.pop()

    def handle_data(self, data):
        self.text.append(data)


def parse(html_text: str) -> Structure:
    s = Structure()
    s.feed(html_text)
    s.close()
    assert s.stack == [], f"unclosed tags: {s.stack}"
    return s


def assert_sections(s: Structure, *expected: str) -> None:
    """Sections come in SECTIONS order, the verdict first, and only those with something to show
    (issue 27: no empty sections); ``expected`` must be among them."""
    assert s.sections == [x for x in SECTIONS if x in s.sections], s.sections
    assert not s.sections or s.sections[0] == "verdict"
    assert set(expected) <= set(s.sections), (expected, s.sections)


def assert_self_contained(html_text: str, s: Structure) -> None:
    assert "http://" not in html_text and "https://" not in html_text
    assert not re.search(r"""(src|href)\s*=\s*["']?//""", html_text)
    assert all(v.startswith("#") for _, _, v in s.urls), s.urls  # only in-page anchors
    assert "script" not in s.tags and "link" not in s.tags and "img" not in s.tags and "iframe" not in s.tags
    assert "@import" not in html_text and "url(" not in html_text


def test_compare_report_has_every_section_and_is_self_contained(compare_doc):
    text = render_html(compare_doc)
    s = parse(text)
    assert_sections(s, "verdict", "fingerprint", "results", "latency", "pareto", "drift")
    assert "sustained" not in s.sections and "training" not in s.sections   # nothing to show: left out
    assert_self_contained(text, s)
    # one CDF + one histogram per row with samples (reference + 4 precisions), plus the Pareto chart
    assert s.svgs_in["latency"] == 2 * 5
    assert s.svgs_in["pareto"] == 1
    body = "".join(s.text)
    for prec in ("fp32", "fp16", "int8", "dynamic"):
        assert prec in body
    assert "logits" in body and "features" in body  # per-output drift
    assert "AMD EPYC 7B13" in body and "2.21.0" in body  # fingerprint
    assert "no training baselines" not in body and "no earlier stored runs" not in body   # no empty sections
    # p99 of int8 host is shown with 3 decimals in the grid
    p99 = next(r for r in compare_doc["rows"] if r["precision"] == "int8")["latency_ms"]["p99"]
    assert f"p99 {p99:.3f} ms" in body


def test_matrix_report_with_history_and_training():
    docs = [make_compare_doc(run_id=f"r{i}", created=f"2026-12-0{i + 1}T10:00:00+00:00", p99_scale=1 + 0.1 * i)
            for i in range(3)] + [make_bench_doc(), make_train_doc()]
    docs[1]["fingerprint"]["tensorflow"] = "2.20.0"
    history = {"mobilenet_v2_035 / int8 / host — p99 ms": [
        {"created": d["created"], "run_id": d["run_id"], "value": d["rows"][2]["latency_ms"]["p99"]} for d in docs[:3]],
        "single point — p99 ms": [{"created": "2026-12-01T00:00:00+00:00", "value": 1.0}]}
    text = render_html(docs, history=history)
    s = parse(text)
    assert_sections(s)
    assert_self_contained(text, s)
    body = "".join(s.text)
    assert s.svgs_in["history"] == 1  # the single-point series is not drawn
    assert s.svgs_in["training"] == 1 and "examples / s" in text
    assert "Key fields that differ" in body and "2.20.0" in body
    assert "Galaxy A52" in body and "device lost" in body  # failed bench row shown with its error
    # 3x5 compare rows + 3 bench rows with samples (the failed row has none)
    assert s.svgs_in["latency"] == 2 * (3 * 5 + 2)
    assert "no raw latency samples stored for this row" in body
    assert "3 runs (0 not ok), see all rows" in body  # 3 runs of the same precision x target in one grid cell


def test_html_special_characters_are_escaped(evil_doc):
    text = render_html(evil_doc, history={"<b>bold</b> — p99 ms": [
        {"created": "2026-12-01T00:00:00+00:00", "value": 1.0}, {"created": "2026-12-02T00:00:00+00:00", "value": 2.0}]})
    assert "<script" not in text.lower()
    assert "&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt;" in text
    assert "<b>" not in text and "&lt;b&gt;bold&lt;/b&gt;" in text
    s = parse(text)
    assert_self_contained(text, s)
    assert evil_doc["rows"][0]["model"].split("\n")[0] in "".join(s.text)


def test_missing_keys_render_dashes():
    doc = {"kind": "compare", "rows": [{}, {"model": "m", "status": "failed", "error": "worker crashed"},
                                       {"model": "m", "precision": "int8", "target": "host",
                                        "latency_ms": {"p99": None}, "samples_ns": [], "drift": {"o": {}}}]}
    text = render_html(doc)
    s = parse(text)
    assert_sections(s, "verdict", "results")
    body = "".join(s.text)
    assert "worker crashed" in body and "this run recorded no environment fingerprint" in body
    assert "-" in body
    empty = render_html([])
    assert parse(empty).sections == []


def test_pareto_front_and_ticks():
    # (size, p99, accuracy)
    pts = [(1.0, 5.0, 0.70), (2.0, 4.0, 0.71), (2.0, 6.0, 0.71), (3.0, 3.0, None), (1.0, 5.0, 0.69)]
    assert pareto_front(pts) == [True, True, False, True, False]
    assert pareto_front([(1.0, 1.0, None)]) == [True]
    assert nice_ticks(0, 1) == [0, 0.2, 0.4, 0.6, 0.8, 1.0]
    assert nice_ticks(3.2, 14.7) == [5, 7.5, 10, 12.5]
    assert nice_ticks(0.0012, 0.0031) == pytest.approx([0.0015, 0.002, 0.0025, 0.003])
    assert nice_ticks(-3, 3) == [-2, 0, 2]


def test_cli_report_from_store(sqlite_store, tmp_path, capsys):
    db, store = sqlite_store
    html_path, md_path = tmp_path / "r.html", tmp_path / "r.md"
    assert run_cli("report", "--latest", "--db", db, "--html", html_path) == 2  # empty store
    assert "empty" in capsys.readouterr().err
    ids = [store.save(make_compare_doc(created=f"2026-12-0{i + 1}T10:00:00+00:00", p99_scale=1 + 0.1 * i),
                      matrix_hash="m1") for i in range(3)]
    train = store.save(make_train_doc(), matrix_hash="m1")
    assert run_cli("report", ids[0], "--db", db, "--html", html_path, "--markdown", md_path) == 0
    s = parse(html_path.read_text())
    assert_sections(s)
    assert s.svgs_in["history"] == 4  # p99 over the 3 stored runs, one chart per precision row
    assert s.svgs_in["latency"] == 10  # samples restored from the store
    assert ids[0] in md_path.read_text()
    assert run_cli("report", "--matrix", "m1", "--db", db, "--html", html_path) == 0
    text = html_path.read_text()
    s = parse(text)
    assert s.svgs_in["training"] == 1 and all(i in text for i in ids + [train])
    assert_self_contained(text, s)
    assert run_cli("report", "--matrix", "nope", "--db", db, "--html", html_path) == 2
    assert run_cli("report", "f" * 32, "--db", db, "--html", html_path) == 2
    assert run_cli("report", "--latest", "--db", db, "--html", tmp_path / "missing" / "r.html") == 2
    capsys.readouterr()
    assert run_cli("report", "--latest", "--db", db, "--markdown", "-") == 0
    assert capsys.readouterr().out.startswith("### edgebench compare: mobilenet_v2_035")


def test_report_holds_only_the_runs_asked_for_and_says_why(sqlite_store, tmp_path):
    """18.6: no unrelated training run slips into a compare report (HTML or the PR Markdown);
    related runs are given explicitly, and each says where it came from."""
    db, store = sqlite_store
    doc = make_compare_doc(model="digits-tiny")
    doc["source"] = {"path": "digits", "kind": "reference"}
    cid = store.save(doc)
    store.save(make_train_doc(model="digits", run_id="r-train-other-size"))   # same name, unrelated run
    html_path, md_path = tmp_path / "r.html", tmp_path / "r.md"
    assert run_cli("report", cid, "--db", db, "--html", html_path, "--markdown", md_path) == 0
    text, md = html_path.read_text(), md_path.read_text()
    assert parse(text).svgs_in.get("training", 0) == 0 and "r-train-other-size" not in text + md
    assert f"run id {cid} given on the command line" in text and "in this report: run id" in md
    tid = store.save(make_train_doc(model="digits", run_id="r-train-digits"))
    assert run_cli("report", cid, tid, "--db", db, "--html", html_path, "--markdown", md_path) == 0
    text, md = html_path.read_text(), md_path.read_text()
    s = parse(text)
    assert s.svgs_in["training"] == 1 and tid in text and cid in text and tid in md
    assert f"run id {tid} given on the command line" in text
    assert_self_contained(text, s)
    assert run_cli("report", "--latest", "--db", db, "--markdown", md_path) == 0
    assert "in this report: the newest stored run (--latest)" in md_path.read_text()


def test_drift_vs_host_and_detection_agreement_are_rendered():
    doc = make_compare_doc(model="ssd_mobilenet-tiny")
    row = doc["rows"][2]
    row["target"] = "adb:emulator-5554"
    row["drift_vs_host"] = {"scores": {"max_abs": 0.0, "mean_abs": 0.0, "rmse": 0.0, "rel_l2": 0.0,
                                       "cosine": 1.0, "psnr_db": "inf", "nan": 0, "inf": 0}}
    row["detection"] = {"box_agreement": 0.656, "matched": 210, "reference_detections": 320, "score_mae": 0.014}
    text = render_html(doc)
    s = parse(text)
    assert_sections(s)
    drift = text[text.index('id="drift"'):].split("</section>")[0]
    assert "adb:emulator-5554" in drift and ">host<" in drift and "65.60%" in drift and "0.0140" in drift


# ---------------------------------------------------------------- issue 18.13: matrix reports pivot on their axes
def _matrix_docs():
    docs = []
    for i, (threads, scale) in enumerate([(1, 1.0), (2, 0.55), (4, 0.4)]):
        d = make_compare_doc(run_id=f"r-cell-{i}", created=f"2026-12-02T10:0{i}:00+00:00", seed=i, p99_scale=scale)
        d["matrix_hash"] = "m" * 16
        d["cell"] = {"key": f"threads={threads}", "kind": "edge", "index": i, "model": "mobilenetv2",
                     "precisions": "fp32,fp16,int8,dynamic", "target": "host", "threads": threads,
                     "delegate": "xnnpack", "data": None}
        docs.append(d)
    return docs


def test_matrix_pivot_rows_model_precision_columns_each_axis_value():
    from edgebench.report.pivot import matrix_pivots
    from edgebench.rows import Document

    (p,) = matrix_pivots([Document.read(d) for d in _matrix_docs()])
    assert p["axes"] == ["threads"] and p["columns"] == ["threads=1", "threads=2", "threads=4"]
    assert [r["precision"] for r in p["rows"]] == ["fp32", "fp16", "int8", "dynamic"]
    int8 = next(r for r in p["rows"] if r["precision"] == "int8")["cells"]
    assert int8[0]["ratio"] == pytest.approx(1.0) and int8[2]["ratio"] == pytest.approx(0.4, rel=0.15)
    assert all(c["p50"] and c["p99"] and c["accuracy"] == 0.6975 for c in int8)
    assert matrix_pivots([Document.read(make_compare_doc())]) == []   # not a matrix: nothing to pivot


def test_matrix_report_shows_the_axis_as_columns_in_html_and_markdown():
    from edgebench.report.markdown import render_markdown

    docs = _matrix_docs()
    text = render_html(docs)
    results = text[text.index('id="results"'):text.index('id="latency"')]
    assert "mobilenet_v2_035: by threads" in results
    for col in ("threads=1", "threads=2", "threads=4", "p50 / first", "top-1"):
        assert col in results
    assert "more run(s), see all rows" not in results           # no grid keeping one cell per precision
    md = render_markdown(docs)
    assert md.startswith("### edgebench matrix: mobilenet_v2_035 by threads")
    assert "threads=2 p50 ms" in md and "threads=4 p50 / first" in md and ("0.40x" in md or "0.41x" in md)


def _label_boxes(svg: str) -> list[tuple[float, float, float, float]]:
    from edgebench.report.html_parts import Plot as _Plot

    boxes = []
    for m in re.finditer(r'<text x="([\d.-]+)" y="([\d.-]+)" text-anchor="(\w+)" fill="[^"]+" class="label">([^<]*)</text>',
                         svg):
        x, y, anchor, label = float(m.group(1)), float(m.group(2)), m.group(3), m.group(4)
        w = len(label.replace("&amp;", "&")) * _Plot.CHAR_W
        left = x - (w if anchor == "end" else w / 2 if anchor == "middle" else 0)
        boxes.append((left, y - _Plot.ASCENT, left + w, y + _Plot.DESCENT))
    return boxes


def test_pareto_labels_never_overlap():
    docs = _matrix_docs()
    text = render_html(docs)
    pareto = text[text.index('id="pareto"'):text.index('id="drift"')]
    boxes = _label_boxes(pareto)
    assert boxes and "threads=2" in pareto                   # labels say which cell a point is
    for i, a in enumerate(boxes):
        for b in boxes[i + 1:]:
            assert not (a[0] < b[2] and b[0] < a[2] and a[1] < b[3] and b[1] < a[3]), (a, b)
    shown = pareto.count("<td>yes</td></tr>") + pareto.count("no (crowded: see this row)")
    assert shown == 15 and len(boxes) == 15 - pareto.count("no (crowded: see this row)")   # 3 x (4 + TF)
    # twelve points on top of each other: labels that do not fit are left out, never overprinted
    crowd = []
    for i in range(12):
        d = make_compare_doc(run_id=f"r{i}", seed=i)
        d["cell"] = {"index": i, "threads": i + 1, "model": "m"}
        crowd.append(d)
    p2 = render_html(crowd)
    p2 = p2[p2.index('id="pareto"'):p2.index('id="drift"')]
    boxes = _label_boxes(p2)
    for i, a in enumerate(boxes):
        for b in boxes[i + 1:]:
            assert not (a[0] < b[2] and b[0] < a[2] and a[1] < b[3] and b[1] < a[3]), (a, b)
    assert "no (crowded: see this row)" in p2
