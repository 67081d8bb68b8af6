"""``torch.einsum`` of two operands (a batched matrix product: builder/einsum.py), of three (a chain of them) and ``torch.roll``
(slice copies) inside trt_like engines, against torch; the einsum forms the engine refuses, with
the reason."""
from __future__ import annotations

import numpy as np
import pytest

import srcore
from srcore_trt_like.builder.einsum import chain, plan

torch = pytest.importorskip("torch")


class Einsum(torch.nn.Module):
    def __init__(self, eq):
        super().__init__()
        self.eq = eq

    def forward(self, a, b):
        return torch.einsum(self.eq, torch.relu(a), b) + 1.0


class Einsum3(torch.nn.Module):
    def __init__(self, eq):
        super().__init__()
        self.eq = eq

    def forward(self, a, b, z):
        return torch.einsum(self.eq, torch.relu(a), b, z) + 1.0


class Roll(torch.nn.Module):
    def __init__(self, shifts, dims):
        super().__init__()
        self.shifts, self.dims = shifts, dims

    def forward(self, x):
        return torch.roll(torch.relu(x), self.shifts, self.dims) * 2.0


def _run(m, args):
    model = srcore.from_torchscript(torch.jit.script(m), args)
    sm = srcore.StaticModule(model, options=srcore.Options(backends=("trt_like", "cpu"),
                                                           engine_options={"timing": False}))
    report = sm.partition
    assert len(report.engines) == 1 and not report.refused, report.format()
    with torch.no_grad():
        want = m(*args).numpy()
    np.testing.assert_allclose(sm(*(a.numpy() for a in args)), want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("eq, sa, sb", [
    ("bhid,bhjd->bhij", (2, 3, 5, 4), (2, 3, 6, 4)),     # Swin's scores: q @ k^T
    ("bij,bjk->bik", (2, 3, 4), (2, 4, 5)),              # bmm as it is
    ("ik,bjk->bji", (3, 4), (2, 5, 4)),                  # a free letter of A after B's in the result
    ("abcd,cdbe->eab", (2, 3, 4, 5), (4, 5, 3, 2)),      # two contracted letters, batch b, permuted result
])
def test_einsum_of_two_operands_matches_torch(eq, sa, sb):
    torch.manual_seed(len(eq))
    _run(Einsum(eq), (torch.randn(*sa), torch.randn(*sb)))


@pytest.mark.parametrize("eq, shapes", [
    ("bthd,bhde,bth->bthe", ((2, 7, 2, 4), (2, 2, 4, 3), (2, 7, 2))),   # linear attention's normalised read
    ("ij,jk,kl->li", ((3, 4), (4, 5), (5, 2))),                          # a matrix chain, result transposed
])
def test_einsum_of_three_operands_is_a_chain_of_products_matching_torch(eq, shapes):
    torch.manual_seed(len(eq))
    _run(Einsum3(eq), tuple(torch.randn(*s) for s in shapes))


def test_einsum_chain_keeps_the_letters_later_operands_name():
    steps = chain("bthd,bhde,bth->bthe", [(2, 7, 2, 4), (2, 2, 4, 3), (2, 7, 2)])
    assert [eq for eq, _, _ in steps] == ["bthd,bhde->bthe", "bthe,bth->bthe"]
    assert steps[0][1] == (2, 7, 2, 3)
    assert "broadcasting" in chain("ij,jk,kl->il", [(3, 4), (4, 5), (6, 2)])


@pytest.mark.parametrize("eq, sa, sb, why", [
    ("...ij,...jk->...ik", (2, 3, 4), (2, 4, 5), "ellipsis"),
    ("bij,bjk->bik", (2, 3, 4), (1, 4, 5), "broadcasting"),
    ("iij,jk->ik", (3, 3, 4), (4, 5), "repeats a letter"),
    ("ij,jk->k", (3, 4), (4, 5), "sums a letter of one operand alone"),
])
def test_einsum_forms_the_engine_refuses_say_why(eq, sa, sb, why):
    assert why in plan(eq, sa, sb)


@pytest.mark.parametrize("shifts, dims", [
    ((-2, -2), (1, 2)),          # Swin's cyclic shift
    ((3,), (-1,)),
    ((1, 2), (1, 1)),            # a dim named twice rolls by the sum
    ((9, 0), (2, 0)),            # a shift past the size, a zero shift
])
def test_roll_matches_torch(shifts, dims):
    torch.manual_seed(3)
    _run(Roll(shifts, dims), (torch.randn(2, 5, 4, 3),))
