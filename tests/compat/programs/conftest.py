"""The programs here are PyTorch code that tests/compat/harness.py runs under PyTorch
or kernelgrad; pytest must not import them itself (--doctest-modules would, under
whatever ``torch`` is)."""

collect_ignore_glob = ["*.py"]
