"""Random decode problems in vLLM's cache layouts, and the torch reference (gather the blocks, fp32 softmax)."""
import math

import torch


class Problem:
    """num_seqs sequences of `lens` tokens; the cache blocks in a random order, spare blocks filled with NaN
    (a read of a block outside a sequence shows)."""

    def __init__(self, lens, num_heads, num_kv_heads, head_size, block_size=16, dtype=torch.float16, alibi=False,
                 seed=0, max_blocks_per_seq=None, device="cuda"):
        gen = torch.Generator(device="cpu").manual_seed(seed)
        self.lens = list(lens)
        num_seqs = len(self.lens)
        self.num_heads, self.num_kv_heads, self.head_size, self.block_size = num_heads, num_kv_heads, head_size, block_size
        self.dtype, self.device = dtype, device
        self.scale = 1.0 / math.sqrt(head_size)
        x = 16 // torch.tensor([], dtype=dtype).element_size()
        blocks = [max(0, -(-n // block_size)) for n in self.lens]
        width = max_blocks_per_seq or max(1, max(blocks))
        spare = 3
        num_blocks = sum(blocks) + spare
        order = torch.randperm(num_blocks, generator=gen)
        table = torch.full((num_seqs, width), int(order[-1]), dtype=torch.int32)
        used = 0
        for s, b in enumerate(blocks):
            table[s, :b] = order[used:used + b]
            used += b

        def rand(*size):
            return (torch.rand(size, generator=gen) * 2 - 1).to(dtype)

        self.query = rand(num_seqs, num_heads, head_size).to(device)
        self.key_cache = rand(num_blocks, num_kv_heads, head_size // x, block_size, x)
        self.value_cache = rand(num_blocks, num_kv_heads, head_size, block_size)
        for b in order[-spare:]:
            self.key_cache[b] = float("nan")
            self.value_cache[b] = float("nan")
        for s, n in enumerate(self.lens):  # the slots past a sequence's end in its last block: NaN too
            if n > 0 and n % block_size:
                last = int(table[s, (n - 1) // block_size])
                self.key_cache[last, :, :, n % block_size:, :] = float("nan")
                self.value_cache[last, :, :, n % block_size:] = float("nan")
        self.key_cache, self.value_cache = self.key_cache.to(device), self.value_cache.to(device)
        self.block_tables = table.to(device)
        self.seq_lens = torch.tensor(self.lens, dtype=torch.int32, device=device)
        self.alibi_slopes = (torch.tensor([2.0 ** (-8.0 * (h + 1) / num_heads) for h in range(num_heads)],  # vLLM's: positive
                                          dtype=torch.float32, device=device) if alibi else None)
        self.max_seq_len = max(self.lens) if self.lens else 0

    def reference(self, lens=None, query=None):
        """[num_seqs, num_heads, head_size] in float32: the blocks gathered, an fp32 softmax."""
        lens = self.lens if lens is None else lens
        query = self.query if query is None else query
        q = query.float()
        out = torch.zeros(q.shape, dtype=torch.float32, device=q.device)
        group = self.num_heads // self.num_kv_heads
        key = self.key_cache.float()
        value = self.value_cache.float()
        for s, n in enumerate(lens):
            if n <= 0:
                continue
            ids = self.block_tables[s, : -(-n // self.block_size)].long()
            k = key[ids].permute(0, 3, 1, 2, 4).reshape(-1, self.num_kv_heads, self.head_size)[:n]  # [n, kv, d]
            v = value[ids].permute(0, 3, 1, 2).reshape(-1, self.num_kv_heads, self.head_size)[:n]
            k = k.repeat_interleave(group, dim=1)  # [n, heads, d]
            v = v.repeat_interleave(group, dim=1)
            scores = torch.einsum("hd,nhd->hn", q[s], k) * self.scale
            if self.alibi_slopes is not None:
                scores = scores + self.alibi_slopes[:, None] * (torch.arange(n, device=q.device) - n + 1)[None, :].float()
            out[s] = torch.einsum("hn,nhd->hd", torch.softmax(scores, dim=-1), v)
        return out


def relative_error(out, ref):
    """Largest relative L2 error over (sequence, head) rows; rows whose reference is 0 compare absolutely."""
    diff = (out.float() - ref).norm(dim=-1)
    norm = ref.norm(dim=-1)
    return float(torch.where(norm > 0, diff / norm.clamp_min(1e-30), diff).max()) if out.numel() else 0.0


def tolerance(dtype):
    return 1e-2 if dtype == torch.bfloat16 else 2e-3
