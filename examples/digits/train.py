"""Train the digits classifier that ``srcore demo`` runs, and write its files next to this script.

    .venv/bin/pip install scikit-learn     # dev-time only: the demo itself needs neither sklearn nor torch
    .venv/bin/python examples/digits/train.py
    .venv/bin/python examples/digits/train.py --convert-only   # re-convert the committed weights only

Writes (all small, committed):
  digits.srm         the model, converted with srcore.from_torchscript (dynamic batch dim)
  digits_test.npz    the held-out split: x float32 [N, 1, 8, 8] in [0, 1], y int64 [N]
  digits_calib.npz   256 training samples (x) to calibrate quantization with (srcore demo --quantized)
  digits_torch.npz   the torch state_dict (to time torch eager beside srcore in the demo)

Deterministic: fixed split and seeds, single-threaded torch, deterministic algorithms.
"""
from __future__ import annotations

import os
import sys

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from net import DigitsNet  # noqa: E402

import srcore  # noqa: E402

SEED = 0
EPOCHS = 30
BATCH = 32


def data():
    from sklearn.datasets import load_digits
    from sklearn.model_selection import train_test_split

    digits = load_digits()
    x = (digits.images / 16.0).astype(np.float32)[:, None]   # [1797, 1, 8, 8], pixel values 0..16 -> [0, 1]
    y = digits.target.astype(np.int64)
    return train_test_split(x, y, test_size=0.2, random_state=SEED, stratify=y)


def train(x_train, y_train) -> DigitsNet:
    torch.manual_seed(SEED)
    torch.set_num_threads(1)
    torch.use_deterministic_algorithms(True)
    net = DigitsNet()
    opt = torch.optim.Adam(net.parameters(), lr=3e-3)
    xt, yt = torch.from_numpy(x_train), torch.from_numpy(y_train)
    gen = torch.Generator().manual_seed(SEED)
    for epoch in range(EPOCHS):
        net.train()
        perm = torch.randperm(len(xt), generator=gen)
        total = 0.0
        for i in range(0, len(xt), BATCH):
            idx = perm[i:i + BATCH]
            loss = torch.nn.functional.cross_entropy(net(xt[idx]), yt[idx])
            opt.zero_grad()
            loss.backward()
            opt.step()
            total += float(loss.detach()) * len(idx)
        if epoch % 10 == 9:
            print(f"epoch {epoch + 1}: loss {total / len(xt):.4f}")
    return net.eval()


def main(argv: list[str]) -> None:
    convert_only = "--convert-only" in argv
    if convert_only:  # the committed weights and split: a new srcore converts the same network again
        test = np.load(os.path.join(HERE, "digits_test.npz"))
        x_test, y_test = test["x"], test["y"]
        net = DigitsNet()
        net.load_state_dict({k: torch.from_numpy(v) for k, v in np.load(os.path.join(HERE, "digits_torch.npz")).items()})
        net.eval()
    else:
        x_train, x_test, y_train, y_test = data()
        net = train(x_train, y_train)
    with torch.inference_mode():
        logits = net(torch.from_numpy(x_test)).numpy()
    acc = float((logits.argmax(1) == y_test).mean())
    print(f"torch: held-out accuracy {acc:.4f} on {len(y_test)} samples")

    model = srcore.from_torchscript(net, (torch.from_numpy(x_test[:1]),), dynamic_dims={"x": {0: "batch"}})
    model.metadata["description"] = ("small CNN on scikit-learn's 8x8 digits (examples/digits/train.py); "
                                     "input x: float32 [batch, 1, 8, 8] in [0, 1]; output: 10 logits")
    srm = os.path.join(HERE, "digits.srm")
    srcore.save(model, srm)
    if not convert_only:
        np.savez_compressed(os.path.join(HERE, "digits_test.npz"), x=x_test, y=y_test)
        # calibration samples for ``srcore quantize`` / ``srcore demo --quantized``: from the training split
        np.savez_compressed(os.path.join(HERE, "digits_calib.npz"), x=x_train[:256])
        np.savez_compressed(os.path.join(HERE, "digits_torch.npz"),
                            **{k: v.detach().numpy() for k, v in net.state_dict().items()})

    # the saved model must agree with torch before it is committed
    got = srcore.StaticModule(srcore.load(srm), backends=("cpu",))(x_test)
    err = float(np.abs(got - logits).max())
    assert err < 1e-4 and (got.argmax(1) == logits.argmax(1)).all(), err
    print(f"wrote {srm} ({os.path.getsize(srm)} bytes); srcore vs torch max |error| {err:.1e}")


if __name__ == "__main__":
    main(sys.argv[1:])
