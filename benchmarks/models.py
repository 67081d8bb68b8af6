"""The public benchmark models (torch, fixed seeds, eval mode, float32).

Numerically identical to the reference set of ``bench-models.md``: same seeds,
same construction order, shapes and inputs. ``MODELS`` maps a name to
``(builder, meta)``; ``meta["compute_bound"]`` marks the models also measured
with 2 intra-op threads; ``meta["torchscript"]`` says whether the TorchScript
peers script or trace the module (Static Runtime rejects the scripted stock
TransformerEncoderLayer, so that one is traced).
"""
from __future__ import annotations

import torch
import torch.nn as nn
import torch.nn.functional as F


def _seed(s: int) -> None:
    torch.manual_seed(s)


class MLPTiny(nn.Module):
    """64-64-64-10 MLP with ReLU."""

    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(64, 64)
        self.fc2 = nn.Linear(64, 64)
        self.fc3 = nn.Linear(64, 10)

    def forward(self, x):
        x = torch.relu(self.fc1(x))
        x = torch.relu(self.fc2(x))
        return self.fc3(x)


def build_mlp_tiny():
    _seed(1)
    return MLPTiny().float().eval(), (torch.randn(1, 64),)


def _ew_block(y: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    # add(x) mul(.5) sigmoid mul(x) tanh add(.1) relu mul(1.5)
    y = y + x
    y = y * 0.5
    y = torch.sigmoid(y)
    y = y * x
    y = torch.tanh(y)
    y = y + 0.1
    y = torch.relu(y)
    y = y * 1.5
    return y


class ElementwiseChain(nn.Module):
    """40 straight-line elementwise ops (5 blocks of 8) on 1x128."""

    def forward(self, x):
        y = _ew_block(x, x)
        y = _ew_block(y, x)
        y = _ew_block(y, x)
        y = _ew_block(y, x)
        y = _ew_block(y, x)
        return y


def build_elementwise_chain():
    _seed(2)
    return ElementwiseChain().float().eval(), (torch.randn(1, 128),)


class MLPWide(nn.Module):
    """1024-4096-4096-1024 MLP with exact (erf) GELU."""

    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(1024, 4096)
        self.fc2 = nn.Linear(4096, 4096)
        self.fc3 = nn.Linear(4096, 1024)

    def forward(self, x):
        x = F.gelu(self.fc1(x))
        x = F.gelu(self.fc2(x))
        return self.fc3(x)


def build_mlp_wide():
    _seed(3)
    return MLPWide().float().eval(), (torch.randn(64, 1024),)


class BasicBlock(nn.Module):
    def __init__(self, cin, cout, stride):
        super().__init__()
        self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(cout)
        self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(cout)
        self.down = None
        if stride != 1 or cin != cout:
            self.down = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))

    def forward(self, x):
        idt = x
        out = F.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        if self.down is not None:
            idt = self.down(x)
        return F.relu(out + idt)


class ResNetSmall(nn.Module):
    """ResNet-18 shape (no torchvision)."""

    def __init__(self, num_classes=1000):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 64, 7, 2, 3, bias=False)
        self.bn1 = nn.BatchNorm2d(64)
        self.maxpool = nn.MaxPool2d(3, 2, 1)
        cin, layers = 64, []
        for i, c in enumerate([64, 128, 256, 512]):
            layers.append(nn.Sequential(BasicBlock(cin, c, 1 if i == 0 else 2), BasicBlock(c, c, 1)))
            cin = c
        self.layer1, self.layer2, self.layer3, self.layer4 = layers
        self.avgpool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(512, num_classes)

    def forward(self, x):
        x = self.maxpool(F.relu(self.bn1(self.conv1(x))))
        x = self.layer4(self.layer3(self.layer2(self.layer1(x))))
        return self.fc(torch.flatten(self.avgpool(x), 1))


def build_resnet_small():
    _seed(4)
    m = ResNetSmall()
    # non-trivial BN statistics, drawn in module order, so conv-bn folding does real work
    with torch.no_grad():
        for mod in m.modules():
            if isinstance(mod, nn.BatchNorm2d):
                mod.running_mean.uniform_(-0.1, 0.1)
                mod.running_var.uniform_(0.5, 1.5)
                mod.weight.uniform_(0.5, 1.5)
                mod.bias.uniform_(-0.1, 0.1)
    return m.float().eval(), (torch.randn(1, 3, 224, 224),)


class TransformerBlock(nn.Module):
    """Two stock nn.TransformerEncoderLayer(256, 4, 1024, batch_first=True)."""

    def __init__(self):
        super().__init__()
        self.l1 = nn.TransformerEncoderLayer(d_model=256, nhead=4, dim_feedforward=1024, batch_first=True)
        self.l2 = nn.TransformerEncoderLayer(d_model=256, nhead=4, dim_feedforward=1024, batch_first=True)

    def forward(self, x):
        return self.l2(self.l1(x))


def build_transformer_block():
    _seed(5)
    return TransformerBlock().float().eval(), (torch.randn(1, 128, 256),)


class ControlFlow(nn.Module):
    """prim::Loop (trip count from the input's shape: 64 // 8 = 8) around a data-dependent prim::If."""

    def __init__(self):
        super().__init__()
        self.a = nn.Linear(64, 64)
        self.b = nn.Linear(64, 64)

    def forward(self, x):
        # count from the shape, not a literal: freezing would unroll a constant-trip loop
        for _ in range(x.size(1) // 8):
            if bool(x.sum() > 0):
                x = torch.tanh(self.a(x))
            else:
                x = torch.sigmoid(self.b(x)) - 0.5
        return x


def build_control_flow():
    _seed(6)
    return ControlFlow().float().eval(), (torch.randn(1, 64),)


class ExplicitEncoderLayer(nn.Module):
    """Post-norm encoder layer (ReLU, eval) with linear/matmul/softmax/layer_norm; weights copied from ``ref``."""

    def __init__(self, ref: nn.TransformerEncoderLayer):
        super().__init__()
        e = ref.self_attn.embed_dim
        self.nhead = ref.self_attn.num_heads
        self.dh = e // self.nhead
        self.scale = 1.0 / float(self.dh) ** 0.5
        self.qkv = nn.Linear(e, 3 * e)
        self.out = nn.Linear(e, e)
        self.ff1 = nn.Linear(e, ref.linear1.out_features)
        self.ff2 = nn.Linear(ref.linear1.out_features, e)
        self.ln1 = nn.LayerNorm(e, eps=ref.norm1.eps)
        self.ln2 = nn.LayerNorm(e, eps=ref.norm2.eps)
        with torch.no_grad():
            self.qkv.weight.copy_(ref.self_attn.in_proj_weight)
            self.qkv.bias.copy_(ref.self_attn.in_proj_bias)
            self.out.weight.copy_(ref.self_attn.out_proj.weight)
            self.out.bias.copy_(ref.self_attn.out_proj.bias)
            self.ff1.load_state_dict(ref.linear1.state_dict())
            self.ff2.load_state_dict(ref.linear2.state_dict())
            self.ln1.load_state_dict(ref.norm1.state_dict())
            self.ln2.load_state_dict(ref.norm2.state_dict())

    def forward(self, x):
        b, t, e = x.shape
        qkv = self.qkv(x).reshape(b, t, 3, self.nhead, self.dh).permute(2, 0, 3, 1, 4)
        q, k, v = qkv[0], qkv[1], qkv[2]
        att = torch.softmax(torch.matmul(q, k.transpose(-2, -1)) * self.scale, dim=-1)
        y = torch.matmul(att, v).transpose(1, 2).reshape(b, t, e)
        x = self.ln1(x + self.out(y))
        return self.ln2(x + self.ff2(torch.relu(self.ff1(x))))


class TransformerBlockExplicit(nn.Module):
    def __init__(self, ref: TransformerBlock):
        super().__init__()
        self.l1 = ExplicitEncoderLayer(ref.l1)
        self.l2 = ExplicitEncoderLayer(ref.l2)

    def forward(self, x):
        return self.l2(self.l1(x))


def build_transformer_block_explicit():
    ref, inputs = build_transformer_block()  # same seed, weights and input
    return TransformerBlockExplicit(ref).float().eval(), inputs


def _meta(compute_bound: bool, torchscript: str = "script") -> dict:
    return {"compute_bound": compute_bound, "torchscript": torchscript}


MODELS = {
    "mlp_tiny": (build_mlp_tiny, _meta(False)),
    "elementwise_chain": (build_elementwise_chain, _meta(False)),
    "control_flow": (build_control_flow, _meta(False)),
    "mlp_wide": (build_mlp_wide, _meta(True)),
    "resnet_small": (build_resnet_small, _meta(True)),
    "transformer_block": (build_transformer_block, _meta(True, "trace")),
    "transformer_block_explicit": (build_transformer_block_explicit, _meta(True)),
}

#: the seven above and the wider set of architecture families (benchmarks/families.py)
from .families import FAMILIES  # noqa: E402

ALL_MODELS = {**MODELS, **FAMILIES}
