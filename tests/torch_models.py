"""PyTorch models for the [torch] tests (imported only by them): ``make_net()`` is the issue's
Conv-BN-ReLU6 / depthwise / hardswish / Linear / softmax module with seeded weights and non-trivial
BatchNorm statistics, so eval mode matters."""

from __future__ import annotations


def make_net():
    import torch

    torch.manual_seed(0)

    class Net(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.conv = torch.nn.Conv2d(3, 8, 3, padding=1)
            self.bn = torch.nn.BatchNorm2d(8)
            self.dw = torch.nn.Conv2d(8, 8, 3, padding=1, groups=8)
            self.pool = torch.nn.AdaptiveAvgPool2d(1)
            self.fc = torch.nn.Linear(8, 10)

        def forward(self, image):
            x = torch.nn.functional.relu6(self.bn(self.conv(image)))
            x = torch.nn.functional.hardswish(self.dw(x))
            return torch.softmax(self.fc(torch.flatten(self.pool(x), 1)), dim=-1)

    net = Net()
    with torch.no_grad():
        net.bn.running_mean.uniform_(-0.5, 0.5)
        net.bn.running_var.uniform_(0.5, 2.0)
        net.fc.weight.mul_(30.0)         # scores that differ between inputs: int8 outputs are not constant
    return net.eval()
