"""pagedattn's vLLM op against the seed's Triton kernel (paged_attention_v2_triton) on the Qwen3.6 shapes:
same inputs, outputs within tolerance of each other and of the torch reference. The seed, never part of the
repository, is loaded at run time from the Python module that PAGEDATTN_SEED_KERNEL names; without it, or
without Triton, the test skips."""
import importlib.util
import os
import pathlib

import pytest
import torch

from paged_problem import Problem, relative_error, tolerance

try:
    import pagedattn
except ImportError:  # no CUDA build here: conftest skips every test
    pagedattn = None
SEED = pathlib.Path(os.environ.get("PAGEDATTN_SEED_KERNEL", "")) if os.environ.get("PAGEDATTN_SEED_KERNEL") else None


def load_seed():
    if SEED is None or not SEED.is_file():
        pytest.skip(f"no seed kernel: PAGEDATTN_SEED_KERNEL={SEED} names no file")
    pytest.importorskip("triton")
    spec = importlib.util.spec_from_file_location("seed_paged_attention_v2_triton", SEED)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.paged_attention_v2_triton


@pytest.mark.parametrize("lens", [[1000], [100000], [4096] * 8, [1, 513, 30000, 7]])
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_same_as_seed_on_qwen_shapes(lens, dtype):
    seed_v2 = load_seed()
    p = Problem(lens, 24, 4, 256, dtype=dtype, seed=len(lens))
    max_seq_len = max(lens)
    parts = -(-max_seq_len // 512)  # the seed's 512-token partitions size its scratch buffers
    exp_sums = torch.empty(len(lens), 24, parts, dtype=torch.float32, device="cuda")
    max_logits = torch.empty_like(exp_sums)
    tmp = torch.empty(len(lens), 24, parts, 256, dtype=dtype, device="cuda")
    args = (p.query, p.key_cache, p.value_cache, 4, p.scale, p.block_tables, p.seq_lens, 16, max_seq_len, None)
    ours, theirs = torch.empty_like(p.query), torch.empty_like(p.query)
    pagedattn.ops.paged_attention_v2(ours, exp_sums, max_logits, tmp, *args, "auto", 1.0, 1.0)
    seed_v2(theirs, exp_sums, max_logits, tmp, *args)
    torch.cuda.synchronize()
    ref = p.reference()
    assert relative_error(ours, ref) < tolerance(dtype)
    assert relative_error(ours, theirs.float()) < 2 * tolerance(dtype)
