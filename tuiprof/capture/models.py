"""Models and data for live capture: torchvision by name, or the user's factory."""

from __future__ import annotations

import difflib
import importlib
from collections.abc import Iterator

import torch
from torch import nn

from tuiprof.capture.config import CaptureError


def build_model(name: str, num_classes: int) -> nn.Module:
    """A torchvision model by name (random weights, ``num_classes`` outputs),
    or ``package.module:callable`` returning an ``nn.Module``."""
    if ":" in name:
        module_name, _, attribute = name.partition(":")
        try:
            factory = getattr(importlib.import_module(module_name), attribute)
        except (ImportError, AttributeError) as exc:
            raise CaptureError(name, f"cannot import the factory ({exc})", "check package.module:callable") from None
        model = factory()
        if not isinstance(model, nn.Module):
            raise CaptureError(name, f"the factory returned {type(model).__name__}, not an nn.Module", "return a model")
        return model
    import torchvision

    available = torchvision.models.list_models()
    if name not in available:
        close = similar_names(name, available)
        hint = f"did you mean {' or '.join(close)}?" if close else "see torchvision.models.list_models()"
        raise CaptureError(name, "not a torchvision model", hint)
    try:
        return torchvision.models.get_model(name, weights=None, num_classes=num_classes)
    except TypeError:
        return torchvision.models.get_model(name, weights=None)


def similar_names(name: str, available: list[str]) -> list[str]:
    """Up to 3 names a typo may have meant (``restnet18`` -> ``resnet18``), closest first."""
    lowered = name.lower()
    scored = sorted(((difflib.SequenceMatcher(None, lowered, m).ratio(), m) for m in available), reverse=True)
    best = scored[0][0] if scored else 0.0
    close = [m for ratio, m in scored[:3] if ratio >= max(0.75, best - 0.05)]
    return close or [m for m in available if lowered in m][:3]


def resolve_device(requested: str) -> torch.device:
    if requested == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if requested.startswith("cuda"):
        if not torch.cuda.is_available():
            raise CaptureError(
                f"--device {requested}", "CUDA is not available on this machine", "use --device cpu or auto"
            )
        device = torch.device(requested)
        if device.index is not None and device.index >= torch.cuda.device_count():
            raise CaptureError(
                f"--device {requested}", f"only {torch.cuda.device_count()} CUDA device(s)", "pick an existing index"
            )
        return device
    if requested == "cpu":
        return torch.device("cpu")
    raise CaptureError(f"--device {requested}", "unknown device", "use auto, cpu, cuda or cuda:N")


def synthetic_batches(
    batch_size: int, input_shape: tuple[int, ...], num_classes: int, device: torch.device
) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
    """One fixed random batch, forever: the model's work without any I/O."""
    generator = torch.Generator().manual_seed(0)
    inputs = torch.randn((batch_size, *input_shape), generator=generator).to(device)
    targets = torch.randint(0, num_classes, (batch_size,), generator=generator).to(device)
    while True:
        yield inputs, targets


def cifar10_batches(
    root: str | None, batch_size: int, device: torch.device
) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
    """Batches of a local CIFAR-10 copy; never downloads."""
    import torchvision
    from torchvision import transforms

    if not root:
        raise CaptureError("--data cifar10", "no --data-root given", "point --data-root at a local CIFAR-10 copy")
    try:
        dataset = torchvision.datasets.CIFAR10(root, train=True, download=False, transform=transforms.ToTensor())
    except RuntimeError:
        raise CaptureError(
            root, "no CIFAR-10 copy here (cifar-10-batches-py)", "download it once elsewhere and copy it"
        ) from None
    loader = torch.utils.data.DataLoader(dataset, batch_size=batch_size, shuffle=True, drop_last=True)
    while True:
        for inputs, targets in loader:
            yield inputs.to(device), targets.to(device)


class TinyTransformer(nn.Module):
    """A small transformer-style classifier over (sequence, features) inputs."""

    def __init__(self, features: int = 64, width: int = 128, heads: int = 4, layers: int = 2, num_classes: int = 10):
        super().__init__()
        self.embed = nn.Linear(features, width)
        layer = nn.TransformerEncoderLayer(width, heads, dim_feedforward=4 * width, batch_first=True)
        self.encoder = nn.TransformerEncoder(layer, layers, enable_nested_tensor=False)
        self.norm = nn.LayerNorm(width)
        self.head = nn.Linear(width, num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.norm(self.encoder(self.embed(x))).mean(dim=1))


def tiny_transformer() -> nn.Module:
    """Factory for ``tuiprof live tuiprof.capture.models:tiny_transformer --input-shape 32x64``."""
    return TinyTransformer()
