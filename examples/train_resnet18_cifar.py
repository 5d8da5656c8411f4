"""The seed's resnet18 CIFAR-10 training script, on synthetic data.

Unmodified training code: no profiler calls in it.  Profile it with

    tuiprof run examples/train_resnet18_cifar.py --epochs 1

(the real script read CIFAR-10 from torchvision; this one makes tensors of
the same shape so it runs anywhere, offline).
"""

import argparse

import torch
import torchvision
from torch import nn
from torch.utils.data import DataLoader, TensorDataset


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--epochs", type=int, default=1)
    parser.add_argument("--batch-size", type=int, default=128)
    parser.add_argument("--samples", type=int, default=1024)
    args = parser.parse_args()

    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    generator = torch.Generator().manual_seed(0)
    images = torch.randn(args.samples, 3, 32, 32, generator=generator)
    labels = torch.randint(0, 10, (args.samples,), generator=generator)
    loader = DataLoader(TensorDataset(images, labels), batch_size=args.batch_size, shuffle=True)

    model = torchvision.models.resnet18(weights=None, num_classes=10).to(device)
    criterion = nn.CrossEntropyLoss()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)

    model.train()
    for epoch in range(args.epochs):
        running = 0.0
        for step, (inputs, targets) in enumerate(loader):  # noqa: B007 (the count after the loop)
            inputs, targets = inputs.to(device), targets.to(device)
            optimizer.zero_grad()
            with torch.autograd.profiler.record_function("model_train"):
                outputs = model(inputs)
            loss = criterion(outputs, targets)
            loss.backward()
            optimizer.step()
            running += loss.item()
        print(f"epoch {epoch}: loss {running / (step + 1):.4f}")


if __name__ == "__main__":
    main()
