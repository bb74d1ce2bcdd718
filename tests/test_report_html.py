"""Self-contained HTML report (edgebench.report.html) and `edgebench report` from a real store."""

from __future__ import annotations

import re
from html.parser import HTMLParser

import pytest

pytest.register_assert_rewrite("conftest_report")
from conftest_report import make_bench_doc, make_compare_doc, make_train_doc, run_cli  # noqa: E402
from edgebench.report.html import SECTIONS, nice_ticks, pareto_front, render_html  # noqa: E402

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


def assert_self_contained(html_text: str, s: Structure) -> None:
    assert "http://" not in html_text and "https://" not in html_text
    assert not re.search(r"""(src|href)\s*=\s*["']?//""", html_text)
    assert all(v.startswith("#") for _, _, v in s.urls), s.urls  # only in-page anchors
    assert "script" not in s.tags and "link" not in s.tags and "img" not in s.tags and "iframe" not in s.tags
    assert "@import" not in html_text and "url(" not in html_text


def test_compare_report_has_every_section_and_is_self_contained(compare_doc):
    text = render_html(compare_doc)
    s = parse(text)
    assert s.sections == list(SECTIONS)
    assert_self_contained(text, s)
    # one CDF + one histogram per row with samples (reference + 4 precisions), plus the Pareto chart
    assert s.svgs_in["latency"] == 2 * 5
    assert s.svgs_in["pareto"] == 1
    body = "".join(s.text)
    for prec in ("fp32", "fp16", "int8", "dynamic"):
        assert prec in body
    assert "logits" in body and "features" in body  # per-output drift
    assert "AMD EPYC 7B13" in body and "2.21.0" in body  # fingerprint
    assert "no training baselines" in body and "no earlier stored runs" in body
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
    assert s.sections == list(SECTIONS)
    assert_self_contained(text, s)
    body = "".join(s.text)
    assert s.svgs_in["history"] == 1  # the single-point series is not drawn
    assert s.svgs_in["training"] == 1 and "examples / s" in text
    assert "Key fields that differ" in body and "2.20.0" in body
    assert "Galaxy A52" in body and "device lost" in body  # failed bench row shown with its error
    # 3x5 compare rows + 3 bench rows with samples (the failed row has none)
    assert s.svgs_in["latency"] == 2 * (3 * 5 + 2)
    assert "no raw latency samples stored for this row" in body
    assert "+2 more run(s)" in body  # 3 runs of the same precision x target in one grid cell


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
    assert s.sections == list(SECTIONS)
    body = "".join(s.text)
    assert "worker crashed" in body and "this run recorded no environment fingerprint" in body
    assert "-" in body
    empty = render_html([])
    assert parse(empty).sections == list(SECTIONS)


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
    assert s.sections == list(SECTIONS)
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
    assert s.sections == list(SECTIONS)
    drift = text[text.index('id="drift"'):text.index('id="training"')]
    assert "adb:emulator-5554" in drift and ">host<" in drift and "65.60%" in drift and "0.0140" in drift
