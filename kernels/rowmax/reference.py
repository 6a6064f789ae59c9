"""rowmax's reference: torch.argmax gives the first index of the maximum (documented)."""
import torch


def rowmax(x):
    x64 = x.double().cpu()
    indices = x64.argmax(dim=-1)
    return x64.gather(-1, indices.unsqueeze(-1)).squeeze(-1), indices


def torch_rowmax(x):
    return torch.max(x, dim=-1)
