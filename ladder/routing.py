"""Routings for the grouped levels (CPU, numpy only): rows per expert, from which the offsets
(cumulative row ends, the torch._grouped_mm contract) follow. A trace records the pairs
(token-expert rows of A), the experts and the weights but not how the rows split over the
experts, so a re-run draws a split with a stated rule and records the experts it hit:
  uniform_counts(pairs, E, seed): each pair's expert uniform and independent (a multinomial),
  topk_counts(tokens, E, top_k, seed): each token picks top_k distinct experts uniformly (a
    uniform router: what models.moe.experts_hit's expectation assumes).
edge_routings(): the correctness suite's hand-made splits (experts with 0 and 1 rows, every row
on one expert, tails)."""
from __future__ import annotations

import numpy as np


def uniform_counts(pairs: int, E: int, seed: int = 0) -> list[int]:
    """Rows per expert: `pairs` rows, each to an expert drawn uniformly (numpy default_rng(seed))."""
    if pairs < 0 or E < 1:
        raise ValueError(f"need pairs >= 0 and E >= 1, got {pairs}, {E}")
    return np.random.default_rng(seed).multinomial(pairs, [1.0 / E] * E).astype(int).tolist()


def topk_counts(tokens: int, E: int, top_k: int, seed: int = 0) -> list[int]:
    """Rows per expert when each of `tokens` tokens picks `top_k` distinct experts uniformly."""
    if not 1 <= top_k <= E:
        raise ValueError(f"need 1 <= top_k <= E, got top_k {top_k}, E {E}")
    rng = np.random.default_rng(seed)
    picks = np.argsort(rng.random((tokens, E)), axis=1)[:, :top_k]
    return np.bincount(picks.ravel(), minlength=E).astype(int).tolist()


def experts_hit(counts) -> int:
    """Experts with at least one row."""
    return int(sum(1 for c in counts if c > 0))


def edge_routings(big: bool = False) -> list[tuple[str, list[int]]]:
    """Named splits the check runs on every grouped level (big: prefill-sized rows)."""
    s = 8 if big else 1
    return [
        ("one expert, one row", [1]),
        ("zero and one-row experts", [0, 1, 0, 0, 1, 3, 0, 1]),
        ("all rows on one expert of 8", [0, 0, 0, 37 * s, 0, 0, 0, 0]),
        ("all rows on the last expert", [0] * 15 + [70 * s]),
        ("leading empty experts, tails", [0, 0, 5, 17, 33, 1, 64, 65]),
        ("row groups past one unit", [40 * s, 0, 129 * s, 3]),
    ]
