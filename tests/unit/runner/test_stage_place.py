"""Where a run stages: shared memory for a node-local run (a symlink from the progress directory),
the output directory otherwise; a full shared memory overflows to the output directory."""

import errno
import os
import shutil
import tempfile
from pathlib import Path

import numpy as np
import pytest

from cook.runner import stage_place, staging
from cook.runner.resume import remove_progress
from cook.runner.stage_place import SHM_PREFIX, place_stage, remove_stage, stage_dir
from cook.runner.staging import DiskStore
from cook.runner.units import UnitSummary
from cook.types import TokenizedSample


def _samples(n: int = 3) -> list[TokenizedSample]:
    return [TokenizedSample(f"s#{i}", np.arange(i + 2, dtype=np.int32), np.ones(i + 2, np.uint8)) for i in range(n)]


def _summary(unit: int, samples: list[TokenizedSample]) -> UnitSummary:
    lengths = np.array([s.length for s in samples], np.int32)
    return UnitSummary(unit, len(samples), (), lengths, np.zeros(len(samples), np.int32))


@pytest.fixture
def shm(tmp_path: Path) -> Path:
    root = tmp_path / "shm"
    root.mkdir()
    return root


def test_node_local_stages_in_shared_memory_and_removal_takes_it_away(tmp_path: Path, shm: Path) -> None:
    out = tmp_path / "out"
    target = place_stage(str(out), True, str(shm), 0)
    assert target is not None and Path(target).parent == shm and Path(target).name.startswith(SHM_PREFIX)
    assert os.path.islink(stage_dir(str(out))) and os.path.realpath(stage_dir(str(out))) == target
    store, samples = DiskStore(str(out)), _samples()
    store.put(_summary(0, samples), samples)
    assert sorted(p.name for p in Path(target).iterdir()) == [".owner", "unit-000000.json", "unit-000000.stage"]
    assert Path(target, ".owner").read_text() == os.path.abspath(stage_dir(str(out)))
    assert [s.input_ids.tolist() for s in DiskStore(str(out)).get(0)] == [[0, 1], [0, 1, 2], [0, 1, 2, 3]]
    remove_progress(str(out))
    assert not out.joinpath(".cook-progress").exists() and list(shm.iterdir()) == []


def test_a_resumed_run_keeps_its_stage_and_a_cluster_run_drops_it(tmp_path: Path, shm: Path) -> None:
    out = str(tmp_path / "out")
    first = place_stage(out, True, str(shm), 0)
    DiskStore(out).put(_summary(4, _samples()), _samples())
    assert place_stage(out, True, str(shm), 0) == first  # same machine: the staged unit is reused
    assert DiskStore(out).summary(4) is not None
    assert place_stage(out, False, str(shm), 0) is None  # another node may write shards: cook again
    assert not os.path.lexists(stage_dir(out)) and list(shm.iterdir()) == []
    assert DiskStore(out).summary(4) is None


def test_output_staging_when_not_node_local_short_of_room_or_already_on_disk(tmp_path: Path, shm: Path) -> None:
    out = str(tmp_path / "out")
    assert place_stage(out, False, str(shm), 0) is None
    assert place_stage(out, True, str(shm), 2**62) is None  # not that much free anywhere
    assert place_stage(out, True, str(tmp_path / "missing"), 0) is None
    os.makedirs(stage_dir(out))
    assert place_stage(out, True, str(shm), 0) is None  # an interrupted run's stage on disk stays there
    assert os.path.isdir(stage_dir(out)) and not os.path.islink(stage_dir(out)) and list(shm.iterdir()) == []


def test_remove_stage_never_follows_a_link_cook_did_not_make(tmp_path: Path) -> None:
    out, other = tmp_path / "out", tmp_path / "precious"
    other.mkdir()
    (other / "keep").write_text("x")
    os.makedirs(os.path.dirname(stage_dir(str(out))))
    os.symlink(other, stage_dir(str(out)))
    remove_stage(str(out))
    assert (other / "keep").read_text() == "x" and not os.path.lexists(stage_dir(str(out)))


def test_a_full_shared_memory_overflows_to_the_output_directory(
    tmp_path: Path, shm: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """ENOSPC in the stage directory (here from the summary, after the stage file was written) puts
    the whole unit in the overflow directory; reads, summaries and drops find it there."""
    out = str(tmp_path / "out")
    target = place_stage(out, True, str(shm), 0)
    assert target is not None
    real = staging._write_atomic

    def full(path: str, buffers: list, free_dir: str | None = None) -> None:
        if path.startswith(stage_dir(out) + os.sep) and path.endswith(".json"):
            raise OSError(errno.ENOSPC, "No space left on device", path)
        real(path, buffers, free_dir)

    monkeypatch.setattr(staging, "_write_atomic", full)
    store, samples = DiskStore(out), _samples()
    store.put(_summary(1, samples), samples)
    assert [p.name for p in Path(target).iterdir()] == [".owner"]
    spill = Path(stage_place.overflow_dir(out))
    assert sorted(p.name for p in spill.iterdir()) == ["unit-000001.json", "unit-000001.stage"]
    again = DiskStore(out)
    assert again.summary(1) is not None and [s.source for s in again.get(1)] == ["s#0", "s#1", "s#2"]
    again.drop(1)
    assert again.summary(1) is None and sorted(p.name for p in (spill / "free").iterdir()) == ["unit-000001.stage"]


def test_other_write_errors_are_not_swallowed(tmp_path: Path, shm: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    out = str(tmp_path / "out")
    place_stage(out, True, str(shm), 0)

    def broken(path: str, buffers: list, free_dir: str | None = None) -> None:
        raise OSError(errno.EIO, "I/O error", path)

    monkeypatch.setattr(staging, "_write_atomic", broken)
    with pytest.raises(OSError, match="I/O error"):
        DiskStore(out).put(_summary(0, _samples()), _samples())


def test_the_next_run_sweeps_stages_that_no_output_directory_links_to(tmp_path: Path, shm: Path) -> None:
    killed, deleted, live = (str(tmp_path / name) for name in ("killed", "deleted", "live"))
    a, b, c = (place_stage(out, True, str(shm), 0) for out in (killed, deleted, live))
    assert a and b and c
    os.unlink(stage_dir(killed))  # its link now points elsewhere (here: nowhere)
    os.symlink(str(tmp_path), stage_dir(killed))
    shutil.rmtree(deleted)  # the user removed the output directory
    fresh = Path(tempfile.mkdtemp(prefix=SHM_PREFIX, dir=shm))  # being created: no owner yet
    old = Path(tempfile.mkdtemp(prefix=SHM_PREFIX, dir=shm))  # a crash before its owner was written
    os.utime(old, (1, 1))
    (shm / "unrelated").mkdir()
    assert sorted(stage_place.sweep_orphans(str(shm))) == sorted([a, b, str(old)])
    assert sorted(p.name for p in shm.iterdir()) == sorted([Path(c).name, fresh.name, "unrelated"])
    place_stage(str(tmp_path / "next"), True, str(shm), 0)  # a new run sweeps too
    assert os.path.isdir(c) and len(list(shm.glob(SHM_PREFIX + "*"))) == 3


def test_a_stage_with_only_its_owner_file_holds_nothing_to_resume(tmp_path: Path, shm: Path) -> None:
    out = str(tmp_path / "out")
    assert not stage_place.has_staged(out)
    place_stage(out, True, str(shm), 0)
    assert not stage_place.has_staged(out)
    DiskStore(out).put(_summary(0, _samples()), _samples())
    assert stage_place.has_staged(out)


@pytest.mark.parametrize("node_local", [True, False])
def test_remove_staged_leaves_no_unit_in_memory_on_disk_or_in_the_overflow(
    tmp_path: Path, shm: Path, node_local: bool
) -> None:
    """What a finished run does while its workers stop: every staged unit goes, wherever it was;
    the progress directory's state stays for the rest of the finish."""
    out = str(tmp_path / "out")
    target = place_stage(out, node_local, str(shm), 0)
    assert (target is not None) == node_local
    store, samples = DiskStore(out), _samples()
    store.put(_summary(0, samples), samples)
    store.put(_summary(1, samples), samples)
    store.drop(1)  # recycled: stage/free/
    spill = Path(stage_place.overflow_dir(out))
    spill.mkdir(parents=True)
    (spill / "unit-000002.stage").write_bytes(b"x")
    progress = Path(out, ".cook-progress")
    (progress / "state.json").write_text("{}")
    stage_place.remove_staged(out)
    assert list(shm.iterdir()) == [] and DiskStore(out).summary(0) is None
    assert sorted(p.name for p in progress.iterdir()) == ["state.json"]
