"""RoPE as a dense rotation matrix written out entry by entry in float64: an oracle that shares
no code with the package (no rope_matrix, no inv_freq), for the tests of every fast path."""

import torch


def dense_rope(x: torch.Tensor, layout: str, base: float = 10_000.0) -> torch.Tensor:
    """R_m x for the token at position m = 0, 1, … along dim −2; float64 on the CPU."""
    dim = x.shape[-1]
    x = x.detach().cpu().double()
    theta = base ** (-torch.arange(0, dim, 2, dtype=torch.float64) / dim)
    half = dim // 2
    if layout == "half":
        pairs = [(i, i + half) for i in range(half)]
    else:
        pairs = [(2 * i, 2 * i + 1) for i in range(half)]
    out = torch.empty_like(x)
    for m in range(x.shape[-2]):
        rotation = torch.zeros(dim, dim, dtype=torch.float64)
        for i, (a, b) in enumerate(pairs):
            c, s = torch.cos(m * theta[i]), torch.sin(m * theta[i])
            rotation[a, a], rotation[a, b], rotation[b, a], rotation[b, b] = c, -s, s, c
        out[..., m, :] = x[..., m, :] @ rotation.T
    return out
