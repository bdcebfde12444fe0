"""Packed recordings (profiling.nsight.packing): large reports committed gzip-compressed, read as if plain."""

from __future__ import annotations

import gzip
import warnings
from pathlib import Path

import pytest

from profiling.nsight import packing, recordings
from profiling.provenance import REPO_ROOT

COMMITTED = REPO_ROOT / "reports" / "h200" / "profiles"


@pytest.fixture(autouse=True)
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    folder = tmp_path / "cache"
    monkeypatch.setenv("OASR_REPORT_CACHE", str(folder))
    return folder


def test_pack_keeps_small_reports_plain_and_reads_large_ones_back(tmp_path: Path, cache: Path) -> None:
    small, large = tmp_path / "a" / "small.ncu-rep", tmp_path / "b" / "large.ncu-rep"
    for path, size in ((small, 100), (large, 5000)):
        path.parent.mkdir()
        path.write_bytes(bytes(range(256)) * (size // 256) + b"x" * (size % 256))
    content = large.read_bytes()
    assert packing.pack(tmp_path, min_bytes=1000) == [packing.packed(large)]
    assert small.is_file() and not large.exists() and packing.exists(large)
    assert gzip.decompress(packing.packed(large).read_bytes()) == content
    first = packing.readable(large)
    assert first.parent.parent == cache and first.name == large.name and first.read_bytes() == content
    assert packing.readable(large) == first  # unpacked once per packed content
    assert packing.readable(small) == small
    missing = tmp_path / "gone.ncu-rep"
    assert packing.readable(missing) == missing and not packing.exists(missing)
    packing.remove(large)
    assert not packing.exists(large)


def test_a_packed_recording_is_found_checked_and_replaced(tmp_path: Path) -> None:
    store = recordings.ProfileStore("h200", "scale", tmp_path)
    staged = store.temp_report_path()
    staged.parent.mkdir(parents=True, exist_ok=True)
    staged.write_bytes(b"report body " * 500)
    entries = [recordings.make_entry("oasr", {"n": 8}, "float16")]
    saved = store.save(staged, entries, preset="roofline", source_hash="abc", provenance={})
    packing.pack(tmp_path, min_bytes=1)
    (found,) = store.profiles()  # intact: its digest is checked on the unpacked copy
    assert found.report == saved.report and not saved.report.exists()
    packing.packed(saved.report).write_bytes(gzip.compress(b"something else"))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert store.profiles() == []
    assert any("its sidecar recorded" in str(w.message) for w in caught)  # its size or digest differs
    packing.packed(saved.report).write_bytes(b"not gzip at all")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert store.profiles() == []
    assert any("cannot be unpacked" in str(w.message) for w in caught)
    again = store.temp_report_path()
    again.write_bytes(b"report body " * 500)
    store.save(again, entries, preset="roofline", source_hash="abc", provenance={})
    assert saved.report.is_file() and not packing.packed(saved.report).exists()  # the new plain one wins


def _packed_profile(tmp_path: Path) -> tuple[recordings.ProfileStore, recordings.StoredProfile]:
    store = recordings.ProfileStore("h200", "scale", tmp_path)
    staged = store.temp_report_path()
    staged.write_bytes(b"report body " * 500)
    entries = [recordings.make_entry("oasr", {"n": 8}, "float16")]
    saved = store.save(staged, entries, preset="roofline", source_hash="abc", provenance={})
    packing.pack(tmp_path, min_bytes=1)
    return store, saved


def _damaged_warnings(store: recordings.ProfileStore) -> list[str]:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert store.profiles() == []
    return [str(w.message) for w in caught if issubclass(w.category, recordings.DamagedRecordingWarning)]


def test_a_gzip_bomb_unpacks_no_further_than_its_sidecar_says(
    tmp_path: Path, cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store, saved = _packed_profile(tmp_path)
    member = gzip.compress(bytes(1 << 20), compresslevel=9)  # 1 MiB of zeros in about 1 kB
    packing.packed(saved.report).write_bytes(member * 256)  # 256 MiB unpacked
    unpacked = []
    read = gzip.GzipFile.read

    def counted(self: gzip.GzipFile, size: int = -1) -> bytes:
        block = read(self, size)
        unpacked.append(len(block))
        return block

    monkeypatch.setattr(gzip.GzipFile, "read", counted)
    (message,) = _damaged_warnings(store)
    assert f"expands past the {saved.meta['report_bytes']} bytes its sidecar records" in message, message
    assert sum(unpacked) <= saved.meta["report_bytes"] + (2 << 20)
    assert [p for p in cache.rglob("*") if p.is_file()] == []


@pytest.mark.parametrize("damage", ["truncated", "corrupt"])
def test_a_damaged_packed_report_leaves_nothing_behind(tmp_path: Path, cache: Path, damage: str) -> None:
    store, saved = _packed_profile(tmp_path)
    path = packing.packed(saved.report)
    data = bytearray(path.read_bytes())
    if damage == "truncated":
        data = data[: len(data) // 2]
    else:
        start = data.index(b"\0", 10) + 1  # past the header and the file name it holds
        data[start + 2 : start + 10] = b"\xff" * 8  # inside the deflate stream: zlib's own error
    path.write_bytes(bytes(data))
    (message,) = _damaged_warnings(store)
    assert f"its packed report {path.name} cannot be unpacked" in message, message
    assert [p for p in cache.rglob("*") if p.is_file()] == []


def test_committed_packed_reports_unpack_to_their_sidecars_digest() -> None:
    packed = sorted(COMMITTED.rglob("*.ncu-rep.gz"))
    assert packed, "the large committed recordings are packed (python -m profiling.nsight.packing reports/h200)"
    assert not [p for p in COMMITTED.rglob("*.ncu-rep") if p.stat().st_size >= packing.MIN_PACKED_BYTES]
    for path in packed:
        stored = recordings.ProfileStore("h200", path.parent.name, root=COMMITTED.parents[1])  # not a scratch copy
        assert any(p.report == path.with_suffix("") for p in stored.profiles()), path
