"""``kg.distributed``: data-parallel training across processes and machines.

The same program runs as N processes (*ranks*), started by ``mpiexec`` (or
``kernelgrad train --nproc N``, or ``python -m kernelgrad.distributed.launch``). Each
joins the group, and the ranks exchange tensors with collectives, as with
``torch.distributed``:

=============================  ==============================================================
``init_process_group``         join (rank and world size come from the MPI launcher)
``get_rank``, ``get_world_size``, ``get_local_rank``, ``is_initialized``
``all_reduce``                 sum / mean / max / min / product across ranks, in place
``broadcast``                  one rank's tensor to all
``all_gather``                 every rank's tensor to all (``all_gather_into_tensor``)
``reduce_scatter``             reduce, then rank r keeps block r (``reduce_scatter_tensor``)
``barrier``                    wait for every rank
``destroy_process_group``      leave
=============================  ==============================================================

CPU tensors travel through MPI (``mpi4py``; the ``mpich`` wheel brings an MPI, so no
system MPI is needed), CUDA tensors through NCCL when it is installed. A collective that
waits longer than the group's timeout raises :class:`CollectiveTimeoutError` naming the
ranks that did not arrive. Collectives may be called inside ``kg.compile``d steps. See
``kg.nn.parallel.DistributedDataParallel`` for gradient averaging, and
``kg.data.DistributedSampler`` for sharding a dataset; docs/distributed.md for running
on several machines.

``import kernelgrad.distributed`` does not import mpi4py; ``init_process_group`` does.

>>> import kernelgrad as kg
>>> _ = kg.distributed.init_process_group("mpi")   # a program started alone: 1 rank
>>> x = kg.tensor([1.0, 2.0])
>>> kg.distributed.all_reduce(x)
>>> x.tolist(), kg.distributed.get_world_size()
([1.0, 2.0], 1)
>>> kg.distributed.destroy_process_group()
"""

from __future__ import annotations

from .collectives import (
    ReduceOp,
    Work,
    all_gather,
    all_gather_into_tensor,
    all_reduce,
    barrier,
    broadcast,
    reduce_scatter,
    reduce_scatter_tensor,
)
from .errors import CollectiveTimeoutError, DistributedError
from .group import (
    ProcessGroup,
    destroy_process_group,
    get_backend,
    get_group,
    get_local_rank,
    get_rank,
    get_world_size,
    init_process_group,
    is_initialized,
)

__all__ = [
    "CollectiveTimeoutError",
    "DistributedError",
    "ProcessGroup",
    "ReduceOp",
    "Work",
    "all_gather",
    "all_gather_into_tensor",
    "all_reduce",
    "barrier",
    "broadcast",
    "destroy_process_group",
    "get_backend",
    "get_group",
    "get_local_rank",
    "get_rank",
    "get_world_size",
    "init_process_group",
    "is_initialized",
    "reduce_scatter",
    "reduce_scatter_tensor",
]
