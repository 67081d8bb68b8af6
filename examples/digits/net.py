"""The digits classifier's architecture (torch), shared by train.py and ``srcore demo``'s torch timing."""
from __future__ import annotations

import torch
from torch import nn


class DigitsNet(nn.Module):
    """A small CNN for scikit-learn's 8x8 digits: input ``[batch, 1, 8, 8]`` in [0, 1], output 10 logits."""

    def __init__(self):
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(1, 16, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),    # 16 x 4 x 4
            nn.Conv2d(16, 32, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),   # 32 x 2 x 2
        )
        self.classifier = nn.Sequential(nn.Flatten(), nn.Linear(128, 64), nn.ReLU(), nn.Linear(64, 10))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.classifier(self.features(x))
