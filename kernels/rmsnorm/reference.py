"""rmsnorm's float64 references (forward and backward) and torch's op as the baseline."""
import torch


def rmsnorm(x: torch.Tensor, weight: torch.Tensor, eps: float = 1e-6) -> torch.Tensor:
    x, w = x.double().cpu(), weight.double().cpu()
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * w


def rmsnorm_backward(grad_y, x, weight, eps):
    x = x.double().cpu().requires_grad_()
    w = weight.double().cpu().requires_grad_()
    with torch.enable_grad():
        y = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * w
        gx, gw = torch.autograd.grad(y, (x, w), grad_y.double().cpu())
    return gx, gw


def torch_rmsnorm(x, weight, eps: float = 1e-6):
    return torch.nn.functional.rms_norm(x, (x.shape[-1],), weight, eps)


# grad_weight sums g * x * rstd down every row: each term is a float32
# product (~1e-7 relative), and the sum of thousands of signed terms can land
# near zero, so its error is absolute (~sqrt(rows) * 1e-7 of the terms' size).
# grad_weight sums over every row (65,536 of them at 2^28 elements), in another
# order than the reference: the rounding grows with the row count, in float64
# too (8.4e-12 seen on an H200 at 2^28, over the default 1e-12).
TOLERANCES = {"rmsnorm_backward": {"float32": (1e-5, 2e-5), "float64": (1e-10, 1e-10)}}
