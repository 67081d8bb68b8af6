"""Conversion bugs a new user hit (issue 12, item 3), each checked against torch: Dim names through
every form of dynamic_shapes and through ExportedPrograms/.pt2 files, dict outputs, a top-level
TransformerEncoderLayer through TorchScript, `srcore convert` without input specs, fork/wait,
and source paths stored relative (the shipped digits model too)."""
from __future__ import annotations

import os
import re
from typing import Dict

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import srcore  # noqa: E402
from srcore.ir.printer import print_graph  # noqa: E402

pytestmark = pytest.mark.torch
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


class TwoInputs(torch.nn.Module):
    def forward(self, x, y):
        return torch.relu(x) + y.sum(1, keepdim=True)


def _dims(model):
    return [s.shape for s in model.input_specs]


@pytest.mark.one_pass
def test_dim_names_from_every_form_of_dynamic_shapes(tmp_path):
    from torch.export import Dim

    from srcore.frontends.torch_export import _dim_names

    batch = Dim("batch")
    ex = (torch.randn(3, 4), torch.randn(3, 5))
    model = srcore.from_torch(TwoInputs(), ex, dynamic_shapes=({0: batch}, {0: batch}))  # a tuple
    assert _dims(model) == [("batch", 4), ("batch", 5)]
    ep = torch.export.export(TwoInputs(), ex, dynamic_shapes=({0: batch}, {0: batch}))
    (sym,) = {str(n.meta["val"].shape[0]) for n in ep.graph.nodes if n.op == "placeholder"}
    for dyn in ({"x": {0: batch}, "y": {0: batch}}, ({0: batch}, {0: batch}), [{0: batch}, None],
                ((batch, None), (batch, None)), [[batch, None]]):
        assert _dim_names(torch, ep, dyn) == {sym: "batch"}, dyn
    # an ExportedProgram (and its .pt2 file) does not record Dim names: torch keeps only its symbols,
    # so the same dynamic_shapes name them; without them the dims keep export's symbol
    torch.export.save(ep, str(tmp_path / "m.pt2"))
    for src in (ep, str(tmp_path / "m.pt2")):
        assert _dims(srcore.from_torch(src, dynamic_shapes={"x": {0: batch}})) == [("batch", 4), ("batch", 5)]
    assert _dims(srcore.from_torch(ep)) == [(sym, 4), (sym, 5)]
    with pytest.raises(srcore.ConversionError, match="unknown inputs"):
        srcore.from_torch(ep, dynamic_shapes={"z": {0: batch}})


class DictOut(torch.nn.Module):
    def forward(self, x) -> Dict[str, torch.Tensor]:
        return {"logits": x * 2.0, "probs": torch.sigmoid(x)}


def test_dict_output_has_the_same_structure_and_names_in_both_frontends():
    m = DictOut().eval()
    x = torch.randn(2, 3)
    want = m(x)
    for model in (srcore.from_torchscript(m, (x,)), srcore.from_torch(m, (x,))):
        assert model.output_names == ("logits", "probs")
        out = srcore.StaticModule(model)(x.numpy())
        assert isinstance(out, tuple) and len(out) == 2
        np.testing.assert_allclose(out[0], want["logits"].numpy(), rtol=1e-6)
        np.testing.assert_allclose(out[1], want["probs"].numpy(), rtol=1e-6)


def test_top_level_transformer_encoder_layer_through_torchscript():
    torch.manual_seed(0)
    m = torch.nn.TransformerEncoderLayer(16, 2, 32, batch_first=True).eval()
    x = torch.randn(2, 5, 16)
    model = srcore.from_torchscript(m, (x,), dynamic_dims={"src": {0: "batch"}})
    # the optional arguments not given as examples take their defaults, as torch.export does
    assert [s.name for s in model.input_specs] == ["src"]
    sm = srcore.StaticModule(model)
    with torch.no_grad():
        for b in (2, 3):
            xb = torch.randn(b, 5, 16)
            np.testing.assert_allclose(sm(xb.numpy()), m(xb).numpy(), rtol=1e-4, atol=1e-5)


def test_is_floating_point_runs_on_a_tensor_known_at_run_time():
    """What the encoder layer's mask checks run when the mask's dtype is not known at load."""
    g = srcore.parse_graph("""graph(%m : Tensor):
  %b : bool = aten::is_floating_point(%m)
  return (%b)
""")
    sm = srcore.StaticModule(srcore.Model.from_graph(g))
    for arr in (np.zeros(2, np.float32), np.zeros(2, np.float16), np.zeros(2, bool), np.zeros(2, np.int64)):
        assert sm(arr) == torch.is_floating_point(torch.from_numpy(arr))


@pytest.mark.one_pass
def test_cli_convert_without_input_specs_fails_naming_the_inputs(tmp_path, capsys):
    from srcore.cli import main

    pt = tmp_path / "two.pt"
    torch.jit.save(torch.jit.script(TwoInputs()), str(pt))
    assert main(["convert", str(pt)]) == 1
    err = capsys.readouterr().err
    assert "input(s) x, y" in err and "--input x=" in err
    assert main(["convert", str(pt), "--input", "x=float32:2,4"]) == 1  # y still unspecified
    assert "input(s) y" in capsys.readouterr().err
    assert not (tmp_path / "two.srm").exists()
    assert main(["convert", str(pt), "--input", "x=float32:2,4", "--input", "y=float32:2,5"]) == 0
    model = srcore.load(str(tmp_path / "two.srm"))
    assert [(s.dtype, s.shape) for s in model.input_specs] == [("float32", (2, 4)), ("float32", (2, 5))]


def _inner(x, w):
    return torch.relu(x @ w)


class Forked(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.w = torch.nn.Parameter(torch.randn(4, 4))

    def forward(self, x):
        fut = torch.jit.fork(_inner, x, self.w)
        y = torch.sigmoid(x)
        return torch.jit.wait(fut) + y


def test_fork_and_wait_are_imported_and_run():
    torch.manual_seed(0)
    m = Forked().eval()
    x = torch.randn(3, 4)
    model = srcore.from_torchscript(m, (x,))
    fork = next(n for n in model.graph.nodes if n.kind == "prim::fork")
    assert [n.kind for n in fork.blocks[0].nodes] == ["aten::matmul", "aten::relu"]
    assert any(n.kind == "aten::wait" for n in model.graph.nodes)
    with torch.no_grad():
        np.testing.assert_allclose(srcore.StaticModule(model)(x.numpy()), m(x).numpy(), rtol=1e-6)


@pytest.mark.one_pass
def test_stored_source_paths_are_relative():
    m = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.ReLU()).eval()
    x = torch.randn(2, 4)
    for model in (srcore.from_torchscript(m, (x,)), srcore.from_torch(m, (x,))):
        sources = {n.source.file for n in model.graph.all_nodes() if n.source is not None}
        assert sources and not any(os.path.isabs(f) for f in sources), sources
        assert any(f.startswith("torch/nn/modules/") for f in sources), sources
        assert not os.path.isabs(model.metadata["source"])
    # the shipped example model: no path of the machine that converted it
    text = print_graph(srcore.load(os.path.join(ROOT, "examples", "digits", "digits.srm")).graph)
    files = re.findall(r"# (\S+):\d+", text)
    assert files and not any(f.startswith("/") for f in files), files


@pytest.mark.one_pass
def test_portable_path():
    import sys

    from srcore.frontends._paths import portable_path

    site = next(p for p in sys.path if p.endswith("site-packages"))
    assert portable_path(os.path.join(site, "torch", "nn", "modules", "linear.py")) == "torch/nn/modules/linear.py"
    assert portable_path(os.path.join(os.getcwd(), "pkg", "m.py")) == "pkg/m.py"
    assert portable_path("/nowhere/on/the/path/m.py") == "m.py"
    assert portable_path("<string>") == "<string>"
