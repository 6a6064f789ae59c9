"""Row-wise int8 quantisation, in float64: scale = max|x| / 127 (0 for an
all-zero row, whose q is 0), q = round-half-even(x * 127 / max|x|)."""
import torch


def quantize_int8(x):
    x64 = x.double().cpu()
    amax = x64.abs().amax(dim=-1, keepdim=True)
    inv = torch.where(amax > 0, 127.0 / amax, torch.zeros_like(amax))
    q = torch.round(x64 * inv).clamp(-127, 127).to(torch.int8)
    return q, (amax / 127.0).squeeze(-1)


def torch_quantize_int8(x):
    amax = x.abs().amax(dim=-1, keepdim=True).float()
    q = torch.round(x.float() * (127.0 / amax)).to(torch.int8)
    return q, (amax / 127.0).squeeze(-1)
