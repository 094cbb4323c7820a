"""vLLM 0.6.x's paged-attention entry points, with its exact argument lists and semantics.

Replace ``from vllm import _custom_ops as ops`` by ``from pagedattn import ops`` in
``vllm/attention/ops/paged_attn.py`` (python/README.md shows the patch). This module defines
``paged_attention_v1`` and ``paged_attention_v2``; every other name (``reshape_and_cache``,
``copy_blocks``, ``swap_blocks``, ...) is vLLM's own, forwarded from ``vllm._custom_ops``, so the file's
other uses of ``ops`` keep working. Both functions write ``out``:

- ``exp_sum``, ``max_logits`` and ``tmp_out`` (v2) are vLLM's workspace for its own kernel. pagedattn
  accepts them and does not use them: it keeps its own temporary storage per device and stream
  (python/README.md). v1 and v2 compute the same thing with the same kernel.
- ``kv_cache_dtype`` "auto": the caches have the query's dtype and ``k_scale``/``v_scale`` must be 1.0.
  "fp8" or "fp8_e4m3" (E4M3FN) and "fp8_e5m2": vLLM 0.6's fp8 caches, torch.uint8 as vLLM stores them
  (or the matching torch.float8_e4m3fn / float8_e5m2), the key cache with x = 16; float16, bfloat16 or
  float32 queries; an element reads as ``float(fp8) * k_scale`` (``v_scale``), the scales finite and > 0.
- The scales reach the GPU through a float[2] the op keeps per device and stream: before each fp8 decode
  a 1-thread kernel on the op's stream writes them into it. Kernel arguments are captured by value, so a
  CUDA graph replays the scales of its capture (vLLM's are per-layer constants) and eager calls are
  stream-ordered. The cost: one tiny extra kernel per fp8 call.
- Any other ``kv_cache_dtype`` and block-sparse attention (``blocksparse_vert_stride > 1``) raise
  ValueError naming the argument. ``tp_rank`` and the other ``blocksparse_*`` arguments are only read by
  block-sparse attention, so they are accepted and not used.
- ``max_seq_len`` is the host-side int vLLM passes: an upper bound of ``seq_lens``.
- One new token per sequence, as vLLM 0.6's decode has: several (speculative decoding's drafts) are
  ``pagedattn.decode(..., q_len=n)``'s, whose query has ``num_seqs * q_len`` rows.
"""
from typing import Optional

import torch

from . import _C
from ._paths import call

__all__ = ["paged_attention_v1", "paged_attention_v2"]


def __getattr__(name):
    """Any other name is vLLM's (``vllm._custom_ops``): the module stands in for it as a whole."""
    if name.startswith("__"):
        raise AttributeError(name)
    try:
        import vllm._custom_ops as vllm_ops
    except ImportError as e:
        raise AttributeError(f"pagedattn.ops has no {name!r}; other names come from vllm._custom_ops, which is not "
                             f"importable ({e})") from e
    return getattr(vllm_ops, name)


# The overloads themselves, not the packets torch.ops.pagedattn.*: a call skips the packet's overload
# resolution.
_v1_op = torch.ops.pagedattn.paged_attention_v1.default
_v2_op = torch.ops.pagedattn.paged_attention_v2.default


def paged_attention_v1(
    out: torch.Tensor,
    query: torch.Tensor,
    key_cache: torch.Tensor,
    value_cache: torch.Tensor,
    num_kv_heads: int,
    scale: float,
    block_tables: torch.Tensor,
    seq_lens: torch.Tensor,
    block_size: int,
    max_seq_len: int,
    alibi_slopes: Optional[torch.Tensor],
    kv_cache_dtype: str,
    k_scale: float,
    v_scale: float,
    tp_rank: int = 0,
    blocksparse_local_blocks: int = 0,
    blocksparse_vert_stride: int = 0,
    blocksparse_block_size: int = 64,
    blocksparse_head_sliding_step: int = 0,
) -> None:
    call(_C.paged_attention_v1_eager, _v1_op,
         (out, query, key_cache, value_cache, num_kv_heads, scale, block_tables, seq_lens, block_size, max_seq_len, alibi_slopes,
          kv_cache_dtype, k_scale, v_scale, tp_rank, blocksparse_local_blocks, blocksparse_vert_stride, blocksparse_block_size,
          blocksparse_head_sliding_step))


def paged_attention_v2(
    out: torch.Tensor,
    exp_sum: torch.Tensor,
    max_logits: torch.Tensor,
    tmp_out: torch.Tensor,
    query: torch.Tensor,
    key_cache: torch.Tensor,
    value_cache: torch.Tensor,
    num_kv_heads: int,
    scale: float,
    block_tables: torch.Tensor,
    seq_lens: torch.Tensor,
    block_size: int,
    max_seq_len: int,
    alibi_slopes: Optional[torch.Tensor],
    kv_cache_dtype: str,
    k_scale: float,
    v_scale: float,
    tp_rank: int = 0,
    blocksparse_local_blocks: int = 0,
    blocksparse_vert_stride: int = 0,
    blocksparse_block_size: int = 64,
    blocksparse_head_sliding_step: int = 0,
) -> None:
    call(_C.paged_attention_v2_eager, _v2_op,
         (out, exp_sum, max_logits, tmp_out, query, key_cache, value_cache, num_kv_heads, scale, block_tables, seq_lens, block_size,
          max_seq_len, alibi_slopes, kv_cache_dtype, k_scale, v_scale, tp_rank, blocksparse_local_blocks, blocksparse_vert_stride,
          blocksparse_block_size, blocksparse_head_sliding_step))
