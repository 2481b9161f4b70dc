"""The data contract (cook.contract): written into the manifest at cook time, checked by the reader
(``make_loader(..., expect=...)``), by ``cook validate --expect-tokenizer`` and across a blend. Every
mismatch names its field, all of them in one error."""

from __future__ import annotations

import dataclasses
import json
import shutil
from pathlib import Path

import pytest
from megatron.energon import WorkerConfig

from cook import format as fmt
from cook.cli.main import main
from cook.contract import (
    CONTRACT_KEY,
    Contract,
    ContractMismatch,
    Expectation,
    MediaSettings,
    contract_problems,
    template_sha256,
    tokenizer_vocab,
)
from cook.reader import dataset_contracts, make_loader
from tests.conftest import DEMO_TOKENIZER

from .reader_data import conversations, cook_jsonl


@pytest.fixture(scope="module")
def cooked(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return cook_jsonl(tmp_path_factory.mktemp("contract_a"), conversations(12), seq_len=128, shard_size=4)


@pytest.fixture(scope="module")
def cooked_long(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return cook_jsonl(tmp_path_factory.mktemp("contract_b"), conversations(12), seq_len=256, shard_size=4)


@pytest.fixture()
def other_tokenizer(tmp_path: Path) -> Path:
    """The demo tokenizer with one more added token: other files, vocab size 8193."""
    target = tmp_path / "tokenizer_b"
    shutil.copytree(DEMO_TOKENIZER, target)
    data = json.loads((target / "tokenizer.json").read_text())
    data["added_tokens"].append(
        {"id": 8192, "content": "<extra>", "single_word": False, "lstrip": False, "rstrip": False,
         "normalized": False, "special": True}
    )  # fmt: skip
    (target / "tokenizer.json").write_text(json.dumps(data))
    return target


def _loader(path: Path, expect: Expectation | None = None, repeat: bool = False):
    config = WorkerConfig(rank=0, world_size=1, num_workers=0)
    return make_loader(path, batch_size=1, worker_config=config, repeat=repeat, expect=expect)


def test_manifest_carries_the_contract(cooked: Path, chat_tokenizer) -> None:
    manifest = json.loads((cooked / fmt.MANIFEST_NAME).read_text())
    contract = manifest[CONTRACT_KEY]
    assert contract["seq_len"] == 128 and contract["pad_multiple"] == 8
    assert contract["vocab_size"] == chat_tokenizer.vocab_size == 8192
    assert contract["control_ids"] == dict(sorted(chat_tokenizer.control_ids.items()))
    assert contract["tokenizer_sha256"] == manifest["tokenizer"]["sha256"]
    assert contract["chat_format"] == "chatml"
    assert contract["template_sha256"] == template_sha256("chatml", str(DEMO_TOKENIZER))
    assert contract["media"] == dataclasses.asdict(MediaSettings())  # the pipeline's defaults
    assert Contract.from_dict(contract).to_dict() == contract


def test_tokenizer_vocab_matches_transformers(hf_tokenizer, chat_tokenizer) -> None:
    size, control = tokenizer_vocab(str(DEMO_TOKENIZER))
    assert size == len(hf_tokenizer) and control == chat_tokenizer.control_ids


def test_matching_trainer_reads(cooked: Path) -> None:
    expect = Expectation(tokenizer_dir=str(DEMO_TOKENIZER), seq_len=128, context_parallel_size=4, media=MediaSettings())
    assert len(list(_loader(cooked, expect))) == json.loads((cooked / fmt.MANIFEST_NAME).read_text())["counts"]["packs"]


def test_every_mismatch_named_in_one_error(cooked: Path, other_tokenizer: Path) -> None:
    expect = Expectation(
        tokenizer_dir=str(other_tokenizer),
        seq_len=16384,
        context_parallel_size=8,
        media={"patch_size": 14, "min_patches": 1024},
    )
    with pytest.raises(ContractMismatch) as error:
        _loader(cooked, expect)
    message = str(error.value)
    assert message.startswith(f"dataset {cooked} does not match the trainer: ")
    assert error.value.problems == (
        "seq_len 128 != 16384",
        "pad_multiple 8 is not a multiple of 2*CP=16",
        f"tokenizer sha256 differs (cooked with {DEMO_TOKENIZER}, training with {other_tokenizer}; files tokenizer.json)",
        "vocab_size 8192 != 8193",
        "media.patch_size 16 != 14",
    )


def test_control_id_and_template_drift() -> None:
    cooked = Contract(
        tokenizer_path="/models/a",
        tokenizer_sha256={},
        chat_format="template",
        template_sha256="0" * 64,
        vocab_size=8192,
        control_ids={"<image>": 7},
        media=MediaSettings(),
        seq_len=4096,
        pad_multiple=8,
    )
    problems = contract_problems(cooked, Expectation(tokenizer_dir=str(DEMO_TOKENIZER)))
    assert "chat template hash differs (chat_format template)" in problems
    assert "control id <image> 7 != 5" in problems
    assert "control id <|im_start|> None != 1" in problems
    assert any(p.startswith("tokenizer sha256 differs (cooked with /models/a") for p in problems)


def test_expectation_refuses_unknown_media_fields() -> None:
    with pytest.raises(ValueError, match=r"unknown field\(s\) \['patch'\]"):
        Expectation(media={"patch": 14})


def _metadataset(tmp: Path, *datasets: Path) -> Path:
    blend = "\n".join(f"        - weight: 1\n          path: {d}" for d in datasets)
    path = tmp / "blend.yaml"
    path.write_text(f"__module__: megatron.energon\n__class__: MetadatasetV2\nsplits:\n  train:\n    blend:\n{blend}\n")
    return path


def test_blend_with_one_contract_loads(cooked: Path, tmp_path: Path) -> None:
    twin = tmp_path / "twin"
    shutil.copytree(cooked, twin)
    blend = _metadataset(tmp_path, cooked, twin)
    assert [name for name, _ in dataset_contracts(blend)] == [str(cooked), str(twin)]
    batch = next(iter(_loader(blend, Expectation(seq_len=128), repeat=True)))  # a weighted blend repeats
    assert batch.num_tokens > 0


def test_blend_of_different_contracts_is_refused(cooked: Path, cooked_long: Path, tmp_path: Path) -> None:
    with pytest.raises(ContractMismatch, match=r"blended datasets .* have different contracts: seq_len 128 != 256"):
        _loader(_metadataset(tmp_path, cooked, cooked_long))


def test_dataset_without_contract_is_refused_only_with_expect(cooked: Path, tmp_path: Path) -> None:
    old = tmp_path / "old"
    shutil.copytree(cooked, old)
    manifest = json.loads((old / fmt.MANIFEST_NAME).read_text())
    del manifest[CONTRACT_KEY]
    (old / fmt.MANIFEST_NAME).write_text(json.dumps(manifest))
    assert next(iter(_loader(old))).num_tokens > 0
    with pytest.raises(ContractMismatch, match="has no contract"):
        _loader(old, Expectation(seq_len=128))


def test_validate_expect_tokenizer(cooked: Path, other_tokenizer: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["validate", str(cooked), "--quiet", "--json", "--expect-tokenizer", str(DEMO_TOKENIZER)]) == 0
    assert json.loads(capsys.readouterr().out)["valid"] is True
    assert main(["validate", str(cooked), "--quiet", "--json", "--expect-tokenizer", str(other_tokenizer)]) == 1
    report = json.loads(capsys.readouterr().out)
    mismatches = [e["detail"] for e in report["errors"] if e["code"] == "contract_mismatch"]
    assert mismatches == [
        f"tokenizer sha256 differs (cooked with {DEMO_TOKENIZER}, training with {other_tokenizer}; files tokenizer.json)",
        "vocab_size 8192 != 8193",
    ]


def test_validate_expect_tokenizer_on_an_unreadable_contract(
    cooked: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    broken = tmp_path / "broken"
    shutil.copytree(cooked, broken)
    manifest = json.loads((broken / fmt.MANIFEST_NAME).read_text())
    del manifest[CONTRACT_KEY]["seq_len"]
    (broken / fmt.MANIFEST_NAME).write_text(json.dumps(manifest))
    assert main(["validate", str(broken), "--quiet", "--json", "--expect-tokenizer", str(DEMO_TOKENIZER)]) == 1
    report = json.loads(capsys.readouterr().out)
    assert [e["detail"] for e in report["errors"]] == [
        f"cannot check the contract: {broken / fmt.MANIFEST_NAME}: contract.seq_len is missing or not an integer"
    ]


def test_a_contract_before_video_storage_stores_video_as_images(cooked: Path) -> None:
    """A manifest written before ``media.video.storage`` has only ``storage``: video frames followed it."""
    data = json.loads((cooked / fmt.MANIFEST_NAME).read_text())[CONTRACT_KEY]
    jpeg = {**data["storage"], "codec": "jpeg", "jpeg_quality": 90, "chroma_subsampling": "4:4:4"}
    older = {k: v for k, v in data.items() if k != "video_storage"} | {"storage": jpeg}
    contract = Contract.from_dict(older)
    assert contract.video_storage == contract.storage and contract.storage.jpeg_quality == 90
    assert contract.storages == (contract.storage,)
    both = Contract.from_dict({**older, "video_storage": {**jpeg, "jpeg_quality": 80}})
    assert [s.jpeg_quality for s in both.storages] == [90, 80]
    assert Contract.from_dict(both.to_dict()) == both
