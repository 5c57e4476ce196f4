"""The kernel cache folder is shared by every process that starts at the same time (the
ranks of a data-parallel job): its writability probe must not depend on a file name that
another process may hold at that moment."""

from __future__ import annotations

from kernelgrad import codecache


def test_a_concurrent_probe_does_not_push_a_process_off_the_shared_cache(tmp_path, monkeypatch):
    root = tmp_path / "cache"
    # Another process is probing right now: the name a fixed probe would use is taken
    # (a folder, so that writing a file there fails as the race made it fail).
    (root / "kernels" / ".write-test").mkdir(parents=True)
    monkeypatch.setenv("KERNELGRAD_CACHE_DIR", str(root))
    monkeypatch.setattr(codecache, "_cache_root", None)
    assert codecache.cache_dir() == root
    assert [p.name for p in (root / "kernels").iterdir()] == [".write-test"]
