"""Untrusted inputs, round 2 (issue 42 items 3-5): YAML alias bombs are refused before they are
expanded, a quoted value and every printed error line are length-capped, a URL that cannot be
parsed is shown with everything after its scheme masked, and an .npz is checked against the
model's inputs from its headers before anything is inflated."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from hostile_inputs import deflate_npz

SECRET = "s3cret"


def _levels(indent: str, n: int = 7) -> str:
    """A 'billion laughs' ladder: 9**n strings from a few hundred bytes."""
    out = [f"{indent}a0: &a0 [lol,lol,lol,lol,lol,lol,lol,lol,lol]"]
    out += [f"{indent}a{i}: &a{i} [{','.join([f'*a{i - 1}'] * 9)}]" for i in range(1, n)]
    return "\n".join(out).lstrip()


def _one_short_line(err: str) -> str:
    lines = [ln for ln in err.strip().splitlines() if ln.strip()]
    assert len(lines) == 1 and len(lines[0]) < 2000, err[:3000]
    return lines[0]


@pytest.mark.parametrize("kind", ["matrix", "gate", "lock"])
def test_alias_bomb_is_one_short_exit_2_line_at_once(run_cli, tmp_path, kind):
    """On main: 13.6 s, 369 MB RSS and a 39 MB error line (the message's !r expanded the tree)."""
    if kind == "matrix":
        f = tmp_path / "m.yaml"
        f.write_text("models:\n- " + _levels("  ") + "\n")
        args = ("matrix", "run", str(f))
    elif kind == "gate":
        f = tmp_path / "gate.yaml"
        f.write_text("int8:\n  max_accuracy_drop:\n    " + _levels("    ") + "\n")
        args = ("convert-and-compare", "digits", "--gate", str(f))
    else:
        f = tmp_path / "env.lock.yaml"
        f.write_text("key_fields:\n  " + _levels("  ") + "\n")
        args = ("env", "--check-lock", str(f))
    assert f.stat().st_size < 500
    t0 = time.perf_counter()
    code, out, err = run_cli(*args)
    elapsed = time.perf_counter() - t0
    line = _one_short_line(err)
    assert code == 2 and str(f) in line and "54 YAML aliases" in line and "billion laughs" in line, err
    assert elapsed < (5 if kind != "lock" else 60), elapsed    # env fingerprints the host (TensorFlow) first


def test_device_profile_alias_bomb_and_recursion(tmp_path):
    from edgebench.core.errors import BadInput
    from edgebench.targets.device_profiles import load_profile_file

    p = tmp_path / "bomb.yaml"
    p.write_text("name: x\nkind: phone\ndelegates:\n- " + _levels("  ") + "\n")
    with pytest.raises(BadInput, match=r"bomb.yaml: its 54 YAML aliases expand to more than 100,000") as e:
        load_profile_file(p)
    assert len(str(e.value)) < 300
    p.write_text("name: &n [*n]\n")
    with pytest.raises(BadInput, match="refers to a node that contains it"):
        load_profile_file(p)


def test_alias_count_limit_and_ordinary_aliases(tmp_path):
    from edgebench.core.bounded import YAML_MAX_ALIASES, load_yaml_text
    from edgebench.core.errors import BadInput

    assert load_yaml_text("t: &t [host, tf]\nu: *t\n", "f.yaml", "fix") == {"t": ["host", "tf"], "u": ["host", "tf"]}
    many = "a: &a 1\nb: [" + ",".join(["*a"] * (YAML_MAX_ALIASES + 1)) + "]\n"
    with pytest.raises(BadInput, match=r"f.yaml:2: uses more than 100 YAML aliases"):
        load_yaml_text(many, "f.yaml", "fix")


def test_a_long_value_is_quoted_capped(run_cli, tmp_path):
    f = tmp_path / "m.yaml"
    f.write_text("models: [digits]\nthreads: ['" + "x" * 100_000 + "']\n")
    code, _, err = run_cli("matrix", "run", str(f))
    line = _one_short_line(err)
    assert code == 2 and "… (100,000 chars)" in line and len(line) < 600, line


def test_shown_and_clip_message_cost_what_they_show():
    from edgebench.core.printable import clip_message, shown

    a: list = ["lol"] * 9
    for _ in range(40):              # 9**40 strings if anything walked the whole tree
        a = [a] * 9
    t0 = time.perf_counter()
    text = shown(a)
    assert time.perf_counter() - t0 < 0.5 and len(text) < 260 and text.endswith("(a list of 9 items)")
    assert shown("ab\x1b") == "'ab\\x1b'" and shown(3) == "3" and shown([1, 2]) == "[1, 2]"
    assert shown("y" * 500, 10) == "'yyyyyyyyy… (500 chars)"
    msg = clip_message("z" * 5000 + "\nok")
    assert msg.split("\n")[0].endswith("… (3,000 more chars)") and msg.split("\n")[1] == "ok"


def test_every_printed_error_line_is_capped(run_cli, tmp_path):
    """A message edgebench builds from a long path is capped where the CLI prints it."""
    deep = tmp_path.joinpath(*(["d" * 200] * 15)) / "m.tflite"     # ~3,000 characters, never created
    code, _, err = run_cli("bench", str(deep), "--no-store")
    assert code == 2, err
    for line in err.splitlines():
        assert len(line) < 2100, len(line)


# --------------------------------------------------------------------------- secrets


@pytest.mark.parametrize("url", [
    f"postgresql://u:{SECRET}@host:notaport/db",       # sqlalchemy: invalid port
    f"postgresql://u:{SECRET}@[::1/db",                # urlsplit: invalid IPv6
    f"postgresql://u:{SECRET}@host:99999999/db",       # port out of range
    f"postgresql://u:pw@host/db#{SECRET}",             # a fragment
    f"postgresql:/u:{SECRET}@host/db",                 # a slash missing: read as a path
])
def test_db_url_that_fails_to_parse_is_shown_masked(run_cli, url):
    code, out, err = run_cli("results", "list", "--db", url)
    assert code == 2, err
    assert SECRET not in out + err, err
    line = _one_short_line(err)
    assert "***" in line, line


@pytest.mark.parametrize("url", [f"http://u:{SECRET}@[::1:9091/", f"http://u:{SECRET}@gw:bad/",
                                 f"http://gw:9091/#{SECRET}", f"http://gw:9091/?x=1#{SECRET}"])
def test_pushgateway_url_that_fails_to_parse_is_shown_masked(run_cli, tmp_path, url):
    code, out, err = run_cli("export", "prometheus", "r1", "--db", str(tmp_path / "r.db"), "--pushgateway", url)
    assert code == 2, err
    assert SECRET not in out + err
    assert "***" in _one_short_line(err)


def test_redact_url_forms():
    from edgebench.core.redact import redact, redact_url

    assert redact_url(f"postgresql://u:{SECRET}@host:notaport/db") == "postgresql://***"
    assert redact_url(f"http://u:{SECRET}@[::1:9091/") == "http://***"
    assert redact_url(f"http://gw:9091/x#{SECRET}") == "http://gw:9091/x#***"
    assert redact_url(f"pg+nodriver://u:{SECRET}@h/db", parsed=False) == "pg+nodriver://***"
    assert redact_url("sqlite:////tmp/a#b.db") == "sqlite:////tmp/a#b.db"     # a file name, not a secret
    assert SECRET not in redact(f"bad: u:{SECRET}@[::1", f"postgresql://u:{SECRET}@[::1/db")


# --------------------------------------------------------------------------- .npz headers


@pytest.fixture(scope="module")
def m881(tmp_path_factory) -> Path:
    """A SavedModel taking [N, 8, 8, 1] float32."""
    import tensorflow as tf

    class M(tf.Module):
        @tf.function(input_signature=[tf.TensorSpec([None, 8, 8, 1], tf.float32, name="x")])
        def serve(self, x):
            return {"y": tf.reduce_mean(x, axis=[1, 2])}

    path = tmp_path_factory.mktemp("m881") / "m881"
    m = M()
    tf.saved_model.save(m, str(path), signatures={"serving_default": m.serve})
    return path


def _crafted(tmp_path: Path) -> Path:
    """1.6 MB that really inflates to a [100000000, 4] float32 array (1.6 GB)."""
    p = deflate_npz(tmp_path / "crafted.npz", {"x": ((100_000_000, 4), "<f4")}, crc=True)
    assert p.stat().st_size < 2 * 1024 ** 2
    return p


def test_npz_that_cannot_feed_the_model_is_refused_from_its_header(run_cli, m881, tmp_path):
    crafted = _crafted(tmp_path)
    t0 = time.perf_counter()
    code, _, err = run_cli("compare", str(m881), str(m881), "--data", str(crafted), "--no-store")
    elapsed = time.perf_counter() - t0
    line = _one_short_line(err)
    assert code == 2, err
    assert "array 'x' declares shape [100000000, 4] float32" in line and "[N, 8, 8, 1]" in line, line
    assert elapsed < 30, elapsed       # the two SavedModels' signatures are most of it


def test_all_rows_reader_never_inflates_a_mismatched_array(tmp_path):
    """``load_data(n=None)`` (every row, as diagnose's calibration and readiness read on main): on main
    9.6 s and 1.67 GB RSS before the shape message; here the header alone refuses it."""
    import json
    import os
    import subprocess
    import sys
    import textwrap

    crafted = _crafted(tmp_path)
    code = textwrap.dedent(f"""
        import json, resource, time
        resource.setrlimit(resource.RLIMIT_AS, ({3 * 1024 ** 3 // 2}, {3 * 1024 ** 3 // 2}))
        from edgebench.model.inputs import Signature, TensorSpec, load_data
        sig = Signature((TensorSpec("x", (None, 8, 8, 1), "float32"),), ())
        t0 = time.perf_counter()
        try:
            load_data({str(crafted)!r}, sig, n=None)
            err = None
        except BaseException as e:
            err = f"{{type(e).__name__}}: {{e}}"
        dt = time.perf_counter() - t0
        hwm = [l for l in open("/proc/self/status") if l.startswith("VmHWM:")][0]
        print(json.dumps({{"error": err, "s": dt, "hwm": int(hwm.split()[1]) * 1024}}))
    """)
    repo = Path(__file__).resolve().parents[1]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(repo), os.environ.get("PYTHONPATH", "")])}
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, env=env)
    got = json.loads(proc.stdout.strip().splitlines()[-1])
    assert got["error"] and got["error"].startswith("BadInput:") and "[100000000, 4]" in got["error"], got
    assert got["s"] < 1 and got["hwm"] < 200 * 1024 ** 2, got
