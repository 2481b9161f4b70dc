import json
from pathlib import Path

import pytest
import yaml

from cook.config import MAX_SEQ_LEN, load_config, pipeline_schema
from cook.errors import ConfigError
from tests.conftest import REPO


def write(tmp_path: Path, data: dict) -> Path:
    path = tmp_path / "p.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


BASE = {"input": {"path": "x.jsonl"}, "tokenizer": {"path": "tok"}}


def test_defaults_and_overrides(tmp_path: Path) -> None:
    cfg = load_config(
        write(tmp_path, BASE),
        ["packing.seq_len=4096", "output.dir=/tmp/o", "packing.buffer_size=all", "media.image.mode=tiles"],
    )
    assert cfg.packing.seq_len == 4096 and cfg.output.dir == "/tmp/o" and cfg.packing.buffer_size == "all"
    assert cfg.media.image.mode == "tiles" and cfg.media.image.min_patches == 1024
    assert cfg.cooker == "auto" and cfg.ray.address is None and cfg.packing.algorithm == "best_fit_decreasing"


@pytest.mark.parametrize(
    ("data", "overrides", "message"),
    [
        ({**BASE, "packing": {"seq_lenn": 5}}, [], "packing: unknown key ('seq_lenn' was unexpected)"),
        (BASE, ["packing.seq_len=abc"], "packing.seq_len: 'abc' is not of type 'integer'"),
        (BASE, ["packing.algorithm=magic"], "packing.algorithm: unknown 'magic'; valid:"),
        (BASE, ["packing.seq_len=1001"], "not a multiple of packing.pad_multiple=8"),
        (BASE, ["cooker=sharegpt"], "cooker: 'sharegpt' is not one of"),
        ({"input": {"path": "x"}}, [], "'tokenizer' is a required property"),
        (BASE, ["packing.buffer_size=0"], "packing.buffer_size: 0 is not a valid value"),
        (BASE, ["oops"], "--set 'oops': expected key.path=value"),
        (BASE, ["input.path.deeper=1"], "--set input.path.deeper: 'path' is not a mapping"),
        (BASE, ["packing.seqlen=1"], "--set packing.seqlen: unknown key (did you mean seq_len?)"),
        (BASE, ["ray.conect_timeout_s=5"], "--set ray.conect_timeout_s: unknown key (did you mean connect_timeout_s?)"),
        (BASE, ["pakcing.seq_len=1"], "--set pakcing.seq_len: unknown key (did you mean packing?)"),
        (BASE, ["packing.zzz=1"], "--set packing.zzz: unknown key (valid: seq_len, algorithm, buffer_size,"),
        (BASE, ["input.media_stores.x=1"], "--set input.media_stores.x: 'media_stores' is not a mapping"),
        ({**BASE, "packing": {"seq_lenn": 5}}, [], "(seq_lenn: did you mean seq_len?)"),
        (BASE, [f"packing.seq_len={10**12}"], "packing.seq_len: 1000000000000 is greater than the maximum of 16777216"),
        (BASE, [f"packing.seq_len={2**31}"], "packing.seq_len: 2147483648 is greater than the maximum"),
        (BASE, ["ray.connect_timeout_s=0"], "ray.connect_timeout_s: 0 is less than or equal to the minimum of 0"),
    ],
)
def test_errors_are_one_line_and_name_the_key(tmp_path: Path, data: dict, overrides: list, message: str) -> None:
    with pytest.raises(ConfigError) as info:
        load_config(write(tmp_path, data), overrides)
    text = str(info.value)
    assert message in text and "\n" not in text


def test_a_set_typo_is_the_flags_not_the_files(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as info:
        load_config(write(tmp_path, BASE), ["packing.seqlen=1"])
    assert str(info.value) == "--set packing.seqlen: unknown key (did you mean seq_len?)"


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        (["packing.seq_len=abc"], "--set packing.seq_len: 'abc' is not of type 'integer'"),
        (["packing.seq_len=[1]"], "--set packing.seq_len: [1] is not of type 'integer'"),
        (["packing.seq_len=0"], "--set packing.seq_len: 0 is less than the minimum of 1"),
        (["packing.seq_len=1001"], "--set packing.seq_len: 1001 is not a multiple of packing.pad_multiple=8"),
        (
            ["packing.pad_multiple=3"],
            "--set packing.pad_multiple: packing.seq_len: 8192 is not a multiple of packing.pad_multiple=3",
        ),
        (["packing={seq_len: abc}"], "--set packing: packing.seq_len: 'abc' is not of type 'integer'"),
        (
            ["media.video.max_frames=4"],
            "--set media.video.max_frames: media.video.min_frames: larger than media.video.max_frames",
        ),
        (["ray.connect_timeout_s=0"], "--set ray.connect_timeout_s: 0 is less than or equal to the minimum of 0"),
    ],
)
def test_a_bad_set_value_is_the_flags_not_the_files(tmp_path: Path, overrides: list, message: str) -> None:
    with pytest.raises(ConfigError) as info:
        load_config(write(tmp_path, BASE), overrides)
    assert str(info.value) == message


def test_the_run_flags_set_values_as_given_and_errors_name_them(tmp_path: Path) -> None:
    flags = {"output.dir": ("--output", "yes"), "input.path": ("--input", "1")}  # YAML would read True and 1
    cfg = load_config(write(tmp_path, BASE), ["output.dir=elsewhere"], flags)
    assert (cfg.output.dir, cfg.input.path) == ("yes", "1")
    with pytest.raises(ConfigError) as info:
        load_config(write(tmp_path, BASE), [], {"ray.num_actors": ("--workers", 0)})
    assert str(info.value) == "--workers: 0 is less than the minimum of 1"


def test_file_and_flag_errors_share_one_line(tmp_path: Path) -> None:
    path = write(tmp_path, {**BASE, "packing": {"pad_multiple": 0}})
    with pytest.raises(ConfigError) as info:
        load_config(path, ["ray.num_actors=0"])
    assert str(info.value) == (
        f"{path}: packing.pad_multiple: 0 is less than the minimum of 1; "
        "--set ray.num_actors: 0 is less than the minimum of 1"
    )


REMOVED_STAGE = (
    "ray.stage: removed; cooked samples are always staged under output.dir (.cook-progress/stage), delete the key"
)


def test_a_removed_key_is_one_line_that_says_what_happens_now(tmp_path: Path) -> None:
    path = write(tmp_path, {**BASE, "ray": {"stage": "auto", "num_actors": 3}})
    with pytest.raises(ConfigError) as info:
        load_config(path)
    assert str(info.value) == f"{path}: {REMOVED_STAGE}"
    with pytest.raises(ConfigError) as info:  # reported with the file's other errors, in one line
        load_config(write(tmp_path, {**BASE, "ray": {"stage": "output", "num_actors": 0}}))
    assert str(info.value) == f"{path}: {REMOVED_STAGE}; ray.num_actors: 0 is less than the minimum of 1"
    with pytest.raises(ConfigError) as info:
        load_config(write(tmp_path, BASE), ["ray.stage=output"])
    assert str(info.value) == f"--set {REMOVED_STAGE}"


def test_seq_len_bound_and_connect_timeout_default(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as info:  # one past the bound: one line naming the key
        load_config(write(tmp_path, BASE), [f"packing.seq_len={MAX_SEQ_LEN + 1}"])
    assert "packing.seq_len" in str(info.value) and "\n" not in str(info.value)
    cfg = load_config(write(tmp_path, BASE), [f"packing.seq_len={MAX_SEQ_LEN}"])
    assert cfg.packing.seq_len == MAX_SEQ_LEN and cfg.ray.connect_timeout_s == 30.0
    assert load_config(write(tmp_path, BASE), ["ray.connect_timeout_s=2.5"]).ray.connect_timeout_s == 2.5


def test_all_errors_collected(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as info:
        load_config(write(tmp_path, {**BASE, "bogus": 1, "packing": {"seq_len": -1}}))
    assert "bogus" in str(info.value) and "packing.seq_len" in str(info.value)


def test_not_yaml_or_missing(tmp_path: Path) -> None:
    (tmp_path / "bad.yaml").write_text("a: [1, 2")
    with pytest.raises(ConfigError, match="not valid YAML"):
        load_config(tmp_path / "bad.yaml")
    with pytest.raises(ConfigError, match="cannot read"):
        load_config(tmp_path / "missing.yaml")


def test_committed_schema_matches_the_dataclasses() -> None:
    committed = json.loads((REPO / "schemas" / "pipeline.schema.json").read_text())
    assert committed == pipeline_schema(), "run `make schemas`"


@pytest.mark.parametrize("name", sorted(p.name for p in (REPO / "pipelines").glob("*.yaml")))
def test_shipped_pipelines_validate(name: str) -> None:
    load_config(REPO / "pipelines" / name)


def test_required_keys_exist() -> None:
    props = pipeline_schema()["properties"]
    for dotted in [
        "input.path",
        "input.format",
        "input.media_root",
        "cooker",
        "tokenizer.path",
        "packing.seq_len",
        "packing.algorithm",
        "packing.buffer_size",
        "packing.pad_multiple",
        "output.dir",
        "ray.address",
        "ray.num_actors",
        "ray.connect_timeout_s",
    ]:
        node = props
        *parents, leaf = dotted.split(".")
        for part in parents:
            node = node[part]["properties"]
        assert leaf in node, dotted


def test_algorithm_literal_names_exactly_the_packing_table() -> None:
    import typing

    from cook.config import PackingAlgorithm
    from cook.packing import ALGORITHMS

    assert typing.get_args(PackingAlgorithm) == tuple(ALGORITHMS.keys())
    enum = pipeline_schema()["properties"]["packing"]["properties"]["algorithm"]["enum"]
    assert enum == list(ALGORITHMS)
