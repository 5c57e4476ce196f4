"""The failure messages of a process group, built without a second process."""

from __future__ import annotations

import pytest

from kernelgrad.distributed.group import Pending, ProcessGroup


def test_a_timeout_in_the_start_up_exchange_names_the_rank():
    """Before the ranks have exchanged their pids and hosts (the exchange itself can
    time out), the error still names the rank instead of failing on missing names."""
    pytest.importorskip("mpi4py")
    group = ProcessGroup.__new__(ProcessGroup)
    group._set_up_bookkeeping(rank=0, size=2, timeout=2.0)
    pending = Pending(lambda: False, 1, "all_gather of the start-up exchange")
    message, suspects = group._explain(pending, 2.0, True, {})
    assert suspects == [1]
    assert "rank 1 (pid ? on ?) did not answer" in message
