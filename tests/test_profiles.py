"""Device profiles: the built-in YAML files, matching, generation for unknown devices, bad YAML."""

from __future__ import annotations

import yaml
import pytest

from edgebench.targets import device_profiles as pr
from edgebench.core.errors import BadInput

REQUIRED = {"pixel_7", "pixel_8", "galaxy_s23", "galaxy_s24", "redmi_note_13_pro_plus", "raspberry_pi_5",
            "jetson_orin_nano"}


@pytest.fixture(scope="module")
def builtin():
    return pr.load_profiles([pr.builtin_dir()])


def test_builtin_profiles_load_and_cite_sources(builtin):
    ids = {p.id for p in builtin}
    assert REQUIRED <= ids
    for p in builtin:
        text = p.path.read_text()
        assert p.sources and all(s.startswith("https://") for s in p.sources), p.id
        assert "Source" in text.split("\n", 3)[0] + text, p.id        # a spec-source comment per file
        assert set(p.affinity_cpus) <= set(p.cpu_ids) and 1 <= p.threads <= len(p.affinity_cpus)
        assert "xnnpack" in p.delegates
        speeds = [c.max_mhz for c in p.clusters]
        assert speeds == sorted(speeds, reverse=True)


def test_known_layouts(builtin):
    by = {p.id: p for p in builtin}
    p7 = by["pixel_7"]
    assert p7.soc == "Google Tensor G2" and p7.cpu_ids == tuple(range(8))
    assert [(c.name, c.cpu_ids, c.max_mhz) for c in p7.clusters] == [
        ("big", (6, 7), 2850), ("mid", (4, 5), 2350), ("little", (0, 1, 2, 3), 1800)]
    assert (p7.threads, p7.affinity_mask, p7.affinity_cpus) == (4, "f0", (4, 5, 6, 7))
    assert by["pixel_8"].cpu_ids == tuple(range(9)) and by["pixel_8"].cluster_of(8).core == "Cortex-X3"
    assert by["galaxy_s24"].cpu_ids == tuple(range(10))
    assert by["raspberry_pi_5"].kind == "board" and by["raspberry_pi_5"].delegates == ("xnnpack",)
    assert by["jetson_orin_nano"].threads == 6


@pytest.mark.parametrize("props,expected", [
    ({"ro.product.model": "Pixel 7", "ro.product.device": "panther"}, "pixel_7"),
    ({"ro.product.model": "pixel 8"}, "pixel_8"),
    ({"ro.product.model": "SM-S911B", "ro.board.platform": "kalama"}, "galaxy_s23"),
    ({"ro.product.model": "SM-S921B", "ro.board.platform": "s5e9945"}, "galaxy_s24"),
    ({"ro.product.model": "SM-S921U1", "ro.board.platform": "pineapple"}, "galaxy_s24_snapdragon"),
    ({"ro.product.model": "23090RA98G", "ro.board.platform": "mt6886"}, "redmi_note_13_pro_plus"),
    ({"model": "Raspberry Pi 5 Model B Rev 1.0"}, "raspberry_pi_5"),
    ({"model": "NVIDIA Jetson Orin Nano Developer Kit"}, "jetson_orin_nano"),
])
def test_match_profile(builtin, props, expected):
    assert pr.match_profile(props, builtin).id == expected


def test_no_match_without_identity(builtin):
    assert pr.match_profile({"ro.product.model": "Pixel 7 Pro"}, builtin) is None
    # same SoC platform but another phone: the platform alone does not claim the device
    assert pr.match_profile({"ro.product.model": "Xperia 1 V", "ro.board.platform": "kalama"}, builtin) is None
    assert pr.match_profile({}, builtin) is None


def test_generate_profile_for_unknown_phone_saves_and_reloads(tmp_path, builtin):
    props = {"ro.product.model": "moto g84 5G", "ro.product.manufacturer": "motorola",
             "ro.product.device": "bangkk", "ro.board.platform": "holi", "ro.build.version.sdk": "34",
             "ro.opengles.version": "196610", "ro.product.cpu.abi": "arm64-v8a"}
    cpu_facts = {i: 1_804_800 for i in range(6)} | {6: 2_208_000, 7: 2_208_000}
    doc = pr.generate_profile(props, cpu_facts)
    assert doc["clusters"] == [{"name": "big", "cpu_ids": [6, 7], "max_mhz": 2208},
                               {"name": "little", "cpu_ids": [0, 1, 2, 3, 4, 5], "max_mhz": 1805}]
    assert doc["recommended"] == {"threads": 2, "affinity_mask": "c0"}
    assert doc["delegates"] == ["xnnpack", "gpu", "nnapi"] and doc["kind"] == "phone"
    path = pr.save_profile(doc, tmp_path / "moto.yaml")
    loaded = pr.load_profile_file(path)
    assert loaded.name == "motorola moto g84 5G" and loaded.affinity_cpus == (6, 7)
    assert pr.match_profile(props, builtin + [loaded]).id == "moto"
    assert yaml.safe_load(path.read_text())["recommended"]["affinity_mask"] == "c0"


def test_generate_profile_four_speeds_and_board(tmp_path):
    facts = [{"cpu": i, "max_khz": f} for i, f in enumerate(
        [1950000] * 4 + [2592000] * 3 + [2900000] * 2 + [3207000])]
    doc = pr.generate_profile({"ro.product.model": "X", "ro.build.version.sdk": "34"}, facts)
    assert [c["name"] for c in doc["clusters"]] == ["prime", "big", "mid", "little"]
    assert doc["recommended"] == {"threads": 4, "affinity_mask": "390"}  # cpus 9, 8, 7 and the first 2.6 GHz (4)
    board = pr.generate_profile({"model": "Some SBC"}, [{"id": i, "max_mhz": 1800} for i in range(4)])
    assert board["kind"] == "board" and board["recommended"] == {"threads": 4, "affinity_mask": "f"}
    assert board["delegates"] == ["xnnpack"]
    pr.profile_from_dict(board)          # valid schema
    with pytest.raises(BadInput, match="max frequency"):
        pr.generate_profile({"model": "x"}, {})


def test_user_dir_overrides_builtin(tmp_path, monkeypatch):
    d = tmp_path / "profiles"
    d.mkdir()
    doc = yaml.safe_load((pr.builtin_dir() / "pixel_7.yaml").read_text())
    doc["recommended"] = {"threads": 2, "affinity_mask": "c0"}
    (d / "pixel_7.yaml").write_text(yaml.safe_dump(doc))
    monkeypatch.setenv(pr.ENV_DIRS, str(d))
    monkeypatch.setenv("EDGEBENCH_DATA_DIR", str(tmp_path / "data"))
    p7 = pr.match_profile({"ro.product.model": "Pixel 7"})
    assert p7.threads == 2 and p7.path == d / "pixel_7.yaml"


@pytest.mark.parametrize("mutate,key", [
    (lambda d: d.pop("soc"), "soc"),
    (lambda d: d.update(kind="tablet"), "kind"),
    (lambda d: d.update(delegates=["xnnpack", "tpu"]), "delegates"),
    (lambda d: d["clusters"][0].update(cpu_ids=[0]), "clusters[2].cpu_ids"),  # repeats a little cpu
    (lambda d: d["clusters"][1].update(max_mhz="fast"), "clusters[1].max_mhz"),
    (lambda d: d["recommended"].update(affinity_mask="f00"), "recommended.affinity_mask"),
    (lambda d: d["recommended"].update(threads=9), "recommended.threads"),
    (lambda d: d.update(match={"ro.board.platform": ["gs201"]}), "match"),
    (lambda d: d.update(colour="blue"), "colour"),
])
def test_bad_profile_names_file_and_key(tmp_path, mutate, key):
    doc = yaml.safe_load((pr.builtin_dir() / "pixel_7.yaml").read_text())
    mutate(doc)
    f = tmp_path / "broken.yaml"
    f.write_text(yaml.safe_dump(doc))
    with pytest.raises(BadInput) as e:
        pr.load_profile_file(f)
    assert str(f) in str(e.value) and f"'{key}'" in str(e.value)


def test_invalid_yaml_and_unsafe_tags(tmp_path):
    f = tmp_path / "bad.yaml"
    f.write_text("name: [unclosed\nkind: phone\n")
    with pytest.raises(BadInput, match=r"bad.yaml: invalid YAML at line"):
        pr.load_profile_file(f)
    g = tmp_path / "evil.yaml"
    g.write_text("name: !!python/object/apply:os.system ['touch pwned']\n")
    with pytest.raises(BadInput, match="invalid YAML"):
        pr.load_profile_file(g)
    assert not (tmp_path / "pwned").exists()
    with pytest.raises(BadInput, match="must be a mapping"):
        pr.profile_from_dict(["a"], "list.yaml")
