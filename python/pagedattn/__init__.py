"""pagedattn for PyTorch: paged decode attention over vLLM's KV cache.

    import pagedattn
    out = pagedattn.decode(query, key_cache, value_cache, block_tables, seq_lens)

``pagedattn.ops.paged_attention_v1`` / ``paged_attention_v2`` take vLLM 0.6.x's exact arguments, so that
vLLM's ``paged_attn.py`` can switch over by changing one import (python/README.md). The operators are
registered as ``torch.ops.pagedattn.*`` (with Meta kernels): CUDA graphs capture them and torch.compile
traces them.
"""
from typing import Optional

import torch

from . import _C  # registers torch.ops.pagedattn
from . import ops
from ._paths import call

__all__ = ["decode", "ops"]

# The overload itself, not the packet torch.ops.pagedattn.decode: a call skips the packet's overload
# resolution (part of the op's host overhead).
_decode_op = torch.ops.pagedattn.decode.default


def decode(
    query: torch.Tensor,
    key_cache: torch.Tensor,
    value_cache: torch.Tensor,
    block_tables: torch.Tensor,
    seq_lens: torch.Tensor,
    *,
    scale: Optional[float] = None,
    max_seq_len: Optional[int] = None,
    alibi_slopes: Optional[torch.Tensor] = None,
    logits_soft_cap: float = 0.0,
    sinks: Optional[torch.Tensor] = None,
    window_left: int = -1,
    q_len: int = 1,
    query_start_loc: Optional[torch.Tensor] = None,
    out: Optional[torch.Tensor] = None,
) -> torch.Tensor:
    """Decode attention of q_len new tokens per sequence (one by default) over its cached keys and values.

    query: [num_seqs * q_len, num_heads, head_size] (float16, bfloat16 or float32; may be a strided view,
    e.g. of a fused qkv tensor); new token i of sequence s is row s * q_len + i. key_cache: [num_blocks,
    num_kv_heads, head_size / x, block_size, x] with x elements in 16 bytes; value_cache: [num_blocks,
    num_kv_heads, head_size, block_size] (vLLM's layout, the query's dtype). block_tables: int32 [num_seqs, max_blocks_per_seq]; seq_lens: int32 [num_seqs].

    scale: defaults to head_size ** -0.5. max_seq_len: a host-side upper bound of seq_lens; it defaults to
    what the block tables can hold (max_blocks_per_seq * block_size), so that nothing reads seq_lens on
    the host. alibi_slopes: float32 [num_heads] or None. logits_soft_cap: > 0 soft-caps each logit (scale
    q.k) to logits_soft_cap * tanh(logit / logits_soft_cap) before ALiBi and the softmax (Gemma 2); 0: off.
    sinks: float32 [num_heads] attention sinks (gpt-oss: a logit per head that joins the softmax's
    denominator, with no value) or None. window_left: >= 0 a sliding window, the token sees the last
    window_left + 1 positions of its sequence (cache blocks wholly before them are never read); -1: off.
    out: written in place and returned (a new tensor like query when None: [num_seqs * q_len, num_heads,
    head_size]).

    q_len: new tokens per sequence, 1 to 8 (speculative decoding: the drafts to verify). Their keys and
    values are already in the cache (seq_lens counts them), and new token i of a sequence of seq_len tokens
    sees its positions [0, seq_len - q_len + 1 + i): causal among the new tokens; a row that sees nothing
    (seq_len - q_len + 1 + i <= 0) is 0. A window keeps the last window_left + 1 of a row's positions;
    ALiBi's bias is relative to the row's last position; the sinks apply to every row of their head.

    query_start_loc: int32 [num_seqs + 1] or None (vLLM V1's name; FlashAttention's cu_seqlens_q): each
    sequence its own number of new tokens, n = query_start_loc[s + 1] - query_start_loc[s] from 0 to q_len
    (q_len is then their most, vLLM's max_query_len), in rows query_start_loc[s] .. + n - 1 of query and
    out, which may have any number of rows; new token i sees [0, seq_len - n + 1 + i). It stays on the
    device (a captured graph replays with new offsets): a sequence whose offsets are not 0 at the start,
    non-decreasing, at most q_len apart and within the rows gets NaN in the rows they name.
    Raises ValueError naming the argument on bad input.
    """
    if max_seq_len is None:
        if key_cache.dim() != 5 or block_tables.dim() != 2:
            raise ValueError("pagedattn: key_cache must be [num_blocks, num_kv_heads, head_size / x, block_size, x] and "
                             f"block_tables [num_seqs, max_blocks_per_seq], got {tuple(key_cache.shape)} and "
                             f"{tuple(block_tables.shape)}")
        max_seq_len = block_tables.shape[1] * key_cache.shape[3]
    if scale is None:  # a query that is not [num_seqs * q_len, num_heads, head_size > 0] is the op's to name
        scale = query.shape[-1] ** -0.5 if query.dim() == 3 and query.shape[-1] > 0 else 1.0
    if out is None:
        out = torch.empty(query.shape, dtype=query.dtype, device=query.device)
    call(_C.decode_eager, _decode_op, (out, query, key_cache, value_cache, block_tables, seq_lens, float(scale), int(max_seq_len),
                                       alibi_slopes, float(logits_soft_cap), sinks, int(window_left), int(q_len), query_start_loc))
    return out
