"""softmax's float64 reference, and torch's own op as the baseline to beat."""
import torch


def softmax(x: torch.Tensor, temperature: float = 1.0) -> torch.Tensor:
    z = x.double().cpu() / temperature
    z = z - z.amax(dim=-1, keepdim=True)
    e = z.exp()
    return e / e.sum(dim=-1, keepdim=True)


def torch_softmax(x: torch.Tensor, temperature: float = 1.0) -> torch.Tensor:
    return torch.softmax(x / temperature if temperature != 1.0 else x, dim=-1)
