"""Linear algebra beyond matmul (kernels in kernels/matrix.py): BLAS-2, inverse, det, solvers, powers."""
from __future__ import annotations

from . import ALL, FLOATS, NUMERIC, family

_k = family("matrix")

KERNELS = [
    _k("aten::mv", "mv", NUMERIC), _k("aten::addmv", "addmv", NUMERIC), _k("aten::addr", "addr", ALL),
    _k("aten::addbmm", "addbmm", NUMERIC), _k("aten::vdot", "vdot", NUMERIC), _k("aten::inner", "inner", NUMERIC),
    _k("aten::kron", "kron", ALL), _k("aten::linalg_inv", "linalg_inv", FLOATS),
    _k("aten::linalg_det", "linalg_det", FLOATS), _k("aten::linalg_solve", "linalg_solve", FLOATS),
    _k("aten::linalg_matrix_power", "linalg_matrix_power", NUMERIC),
    _k("aten::linalg_matrix_exp", "linalg_matrix_exp", FLOATS), _k("aten::linalg_cond", "linalg_cond", FLOATS),
    _k("aten::linalg_cond.p_str", "linalg_cond", FLOATS), _k("aten::linalg_tensorinv", "linalg_tensorinv", FLOATS),
    _k("aten::linalg_solve_triangular", "linalg_solve_triangular", FLOATS),
    _k("aten::cholesky_inverse", "cholesky_inverse", FLOATS), _k("aten::cholesky_solve", "cholesky_solve", FLOATS),
    _k("aten::nuclear_norm", "nuclear_norm", FLOATS), _k("aten::nuclear_norm.dim", "nuclear_norm", FLOATS),
    _k("aten::cross", "cross", NUMERIC), _k("aten::linalg_cross", "linalg_cross", NUMERIC),
    _k("aten::linalg_householder_product", "linalg_householder_product", FLOATS), _k("aten::ormqr", "ormqr", FLOATS),
]
