"""llm-bench --task-score / --task-file with LiteRT-LM's real engine on the counting bundles
(scripts/build_counting_litertlm.py): the generated set is scored per bundle and stored; a task file
whose answers the f32 bundle's cycle determines is scored right on some items and wrong on others,
the planted twin (its greedy output differs from decode position 6 on llm-bench's agreement prompt)
scores fewer, and `results compare` of the two stored runs calls the task score "worse"."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from conftest import require_extra
from edgebench.llm.bench import LlmBenchSettings
from edgebench.llm.tasks import generate, is_correct
from test_llm_bench import COUNT, PLANTED, cli


@pytest.fixture()
def _litert_lm():
    require_extra("litert_lm", "llm")


def test_generated_items_are_deterministic_copy_and_addition():
    a, b = generate(8), generate(8)
    assert a == b and generate(8, seed=1) != a
    assert [i["kind"] for i in a] == ["copy", "addition"] * 4
    add = a[1]
    x, y = (int(t) for t in add["prompt"].split("Question: ")[1].split(" = ")[0].split(" + "))
    assert add["answer"] == str(x + y)
    assert is_correct(" 82\nand more", "82") and is_correct("82.", "82") and not is_correct("821", "82")
    assert not is_correct("fox lamp", "fox lamp river") and is_correct("fox  lamp river, ok", "fox lamp river")


def _write(path: Path, items: list[dict]) -> str:
    path.write_text("".join(json.dumps(i) + "\n" for i in items))
    return str(path)


@pytest.mark.extras
@pytest.mark.usefixtures("_litert_lm")
def test_task_score_is_stored_and_a_lower_score_is_worse_in_results_compare(tmp_path):
    prompt = LlmBenchSettings(bundles=("x",)).prompt        # the planted twin diverges at decode position 6 here
    other = "Repeat exactly: fox lamp river\nOutput:"
    probe = _write(tmp_path / "probe.jsonl", [{"prompt": p, "answer": "?"} for p in (prompt, other)])
    out = tmp_path / "probe.json"
    p = cli(tmp_path, "llm-bench", COUNT, "--prefill", "32", "--decode", "8", "--repeats", "1", "--no-store",
            "--task-file", probe, "--json", str(out))
    assert p.returncode == 0, p.stderr
    got = [i["output"] for i in json.loads(out.read_text())["rows"][0]["llm"]["task_score"]["items"]]
    assert all(got) and got[0] != got[1]
    # answers the f32 bundle's cycle determines (right for it), and one no bundle gives (wrong for both)
    tasks = _write(tmp_path / "tasks.jsonl", [{"prompt": prompt, "answer": got[0]}, {"prompt": other, "answer": got[1]},
                                             {"prompt": other, "answer": "fox lamp river"}])
    db, ids, scores = str(tmp_path / "t.db"), [], []
    for bundle in (COUNT, PLANTED):
        path = tmp_path / f"{Path(bundle).stem}.json"
        p = cli(tmp_path, "llm-bench", bundle, "--name", "tiny-count", "--prefill", "32", "--decode", "8",
                "--repeats", "1", "--task-file", tasks, "--db", db, "--json", str(path))
        assert p.returncode == 0, p.stderr
        doc = json.loads(path.read_text())
        ids.append(doc["run_id"])
        ts = doc["rows"][0]["llm"]["task_score"]
        scores.append((ts["correct"], ts["total"]))
        assert "checks the machinery" in p.stdout and "task score" in p.stdout
        assert doc["task_score"]["note"].startswith("on a random-weight test bundle")
    assert scores == [(2, 3), (1, 3)], scores
    cmp_path = tmp_path / "cmp.json"
    p = cli(tmp_path, "results", "compare", *ids, "--db", db, "--json", str(cmp_path))
    assert p.returncode == 0, p.stderr
    (pair,) = json.loads(cmp_path.read_text())["rows"]
    ch = {c["metric"]: c for c in pair["changes"]}
    assert ch["task score"]["verdict"] == "worse", ch["task score"]
    assert ch["task score"]["a"] == pytest.approx(2 / 3) and ch["task score"]["b"] == pytest.approx(1 / 3)
    p = cli(tmp_path, "results", "compare", *ids, "--db", db, "--fail-on-regression")
    assert p.returncode == 1 and "task score" in p.stdout + p.stderr


@pytest.mark.extras
@pytest.mark.usefixtures("_litert_lm")
def test_generated_set_runs_on_every_bundle_and_a_bad_task_file_is_one_line(tmp_path):
    out = tmp_path / "gen.json"
    p = cli(tmp_path, "llm-bench", COUNT, PLANTED, "--name", "tiny-count", "--prefill", "32", "--decode", "8",
            "--repeats", "1", "--no-store", "--task-score", "6", "--json", str(out), "--no-agreement")
    assert p.returncode == 0, p.stderr
    doc = json.loads(out.read_text())
    for r in doc["rows"]:
        ts = r["llm"]["task_score"]
        assert ts["total"] == 6 and [i["kind"] for i in ts["items"]] == ["copy", "addition"] * 3
        assert ts["task_set"] == "generated: 3 copy + 3 addition, seed 47"
        assert all(i["output"] for i in ts["items"]) and ts["correct"] == sum(i["correct"] for i in ts["items"])
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"prompt": "x"}\n')
    p = cli(tmp_path, "llm-bench", COUNT, "--no-store", "--task-file", str(bad))
    assert p.returncode == 2 and "Traceback" not in p.stderr
    assert p.stderr.strip().splitlines()[-1].startswith(f"error: --task-file {bad} line 1: needs a \"prompt\"")
    p = cli(tmp_path, "llm-bench", COUNT, "--no-store", "--task-score", "4", "--target", "adb:emulator-5554")
    assert p.returncode == 2 and "--task-score runs on the host" in p.stderr
