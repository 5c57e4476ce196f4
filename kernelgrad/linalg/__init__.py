"""``kg.linalg``: PyTorch's ``torch.linalg``.

>>> import kernelgrad as kg
>>> kg.linalg.norm(kg.tensor([[3.0, 4.0], [0.0, 0.0]]), dim=1).tolist()
[5.0, 0.0]
>>> kg.linalg.det(kg.tensor([[2.0, 1.0], [1.0, 3.0]])).item()
5.0...

* Norms (``vector_norm``, ``matrix_norm``, ``norm``), ``matrix_power``, ``matrix_exp``
  (scaling and squaring), ``multi_dot``, ``cross``, ``vecdot``, ``diagonal``,
  ``vander``, ``cond``, ``tensorinv``, ``tensorsolve`` and ``matmul`` are composed from
  tensor ops, so their gradients come from the composition (``_norms.py``,
  ``_composed.py``).
* The factorizations and solvers (``inv``, ``det``, ``slogdet``, ``solve``,
  ``cholesky``, ``solve_triangular``, ``qr``, ``eigh``, ``svd``, ``lstsq``, ``pinv``,
  ``matrix_rank`` and their ``*_ex`` / ``*vals*`` forms) compute their values on the
  host with NumPy's LAPACK, batched over the leading dims, for every device (a CUDA
  tensor goes to the host and its result back, one copy each: a round trip on a GPU);
  their gradients are PyTorch's formulas in tensor ops on the tensor's device, twice
  differentiable where the formula is (``_decompositions.py``, ``_host.py``).
* A singular or not positive-definite matrix raises :class:`LinAlgError` (a
  ``RuntimeError``, as ``torch.linalg.LinAlgError``) naming the batch element.

The legacy top-level names (``kg.inverse``, ``kg.logdet``, ``kg.svd`` returning ``V``,
``kg.triangular_solve``, ...) and their Tensor methods are in ``_legacy.py``.
"""

from __future__ import annotations

from ..errors import LinAlgError
from ._composed import (
    cond,
    cross,
    diagonal,
    matmul,
    matrix_exp,
    matrix_power,
    multi_dot,
    tensorinv,
    tensorsolve,
    vander,
    vecdot,
)
from ._decompositions import (
    cholesky,
    cholesky_ex,
    det,
    eigh,
    eigvalsh,
    inv,
    inv_ex,
    lstsq,
    matrix_rank,
    pinv,
    qr,
    slogdet,
    solve,
    solve_ex,
    solve_triangular,
    svd,
    svdvals,
)
from ._norms import matrix_norm, norm, vector_norm

__all__ = [
    "LinAlgError",
    "cholesky",
    "cholesky_ex",
    "cond",
    "cross",
    "det",
    "diagonal",
    "eigh",
    "eigvalsh",
    "inv",
    "inv_ex",
    "lstsq",
    "matmul",
    "matrix_exp",
    "matrix_norm",
    "matrix_power",
    "matrix_rank",
    "multi_dot",
    "norm",
    "pinv",
    "qr",
    "slogdet",
    "solve",
    "solve_ex",
    "solve_triangular",
    "svd",
    "svdvals",
    "tensorinv",
    "tensorsolve",
    "vander",
    "vecdot",
    "vector_norm",
]
