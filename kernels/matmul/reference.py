"""matmul's float64 reference; torch.matmul is the baseline (this kernel is for numerics, not speed)."""
import torch


def matmul(a, b):
    return a.double().cpu() @ b.double().cpu()


def torch_matmul(a, b):
    return torch.matmul(a, b)


# Sums of k products cancel: the float32 accumulation's error is absolute,
# about sqrt(k) ulps of the partial sums, not relative to a result near zero:
# at k = 4096 (sums of size ~64) that is ~2e-4, and 18 of 262,144 results
# were over an atol of 1e-4 on an H200.
TOLERANCES = {"matmul": {"float32": (1e-4, 2e-3), "float16": (2e-3, 2e-3), "bfloat16": (1e-2, 1e-2)}}
