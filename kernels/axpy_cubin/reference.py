"""axpy's reference, in float64 on the CPU: what every backend and dtype is checked against."""
import torch


def axpy(x: torch.Tensor, y: torch.Tensor, alpha: float) -> torch.Tensor:
    return alpha * x.double().cpu() + y.double().cpu()
