"""gemm_nvrtc's float64 reference (the same GEMM as kernels/gemm), and torch.matmul as its baseline."""
import torch


def gemm(a, b, c=None, bias=None, alpha=1.0, beta=0.0):
    d = alpha * (a.double().cpu() @ b.double().cpu())
    if c is not None:
        d = d + beta * c.double().cpu()
    if bias is not None:
        d = d + bias.double().cpu()
    return d


def torch_matmul(a, b, c=None, bias=None, alpha=1.0, beta=0.0):
    d = torch.matmul(a, b)
    if alpha != 1.0:
        d = d * alpha
    if c is not None:
        d = d + beta * c
    if bias is not None:
        d = d + bias
    return d


# f32 accumulation over k: the error is absolute, about sqrt(k) ulps of the
# partial sums (see kernels/matmul/reference.py), plus one rounding to the
# output's 16-bit type, which is relative.
TOLERANCES = {"gemm": {"float16": (2e-3, 2e-3), "bfloat16": (1e-2, 1e-2)}}
