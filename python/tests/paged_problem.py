"""Random decode problems in vLLM's cache layouts, and the torch reference (gather the blocks, fp32 softmax;
fp64 for fp8 caches); VllmProblem: a problem built as vLLM 0.6.3's kernel test builds it, with a float64
reference."""
import math
import random

import torch

# vLLM's kv_cache_dtype -> the torch dtype of its fp8 elements ("fp8" is e4m3 on CUDA).
FP8_DTYPES = {"fp8": torch.float8_e4m3fn, "fp8_e4m3": torch.float8_e4m3fn, "fp8_e5m2": torch.float8_e5m2}


class Problem:
    """num_seqs sequences of `lens` tokens; the cache blocks in a random order, spare blocks filled with NaN
    (a read of a block outside a sequence shows).

    kv_cache_dtype "auto": the caches have the query's dtype. "fp8", "fp8_e4m3" or "fp8_e5m2": they hold
    vLLM's quantization of the random values, fp8(value / k_scale) and fp8(value / v_scale) (NaN stays NaN),
    in the fp8 layout (x = 16), as uint8 (how vLLM 0.6 stores them) or, with fp8_as_uint8=False, as the
    torch float8 dtype; the reference reads them back as float(fp8) * scale.

    q_len: new tokens per sequence (pagedattn.decode's q_len): the query has num_seqs * q_len rows, new token
    i of sequence s in row s * q_len + i; the lens count them (their keys and values are in the cache)."""

    def __init__(self, lens, num_heads, num_kv_heads, head_size, block_size=16, dtype=torch.float16, alibi=False,
                 seed=0, max_blocks_per_seq=None, device="cuda", kv_cache_dtype="auto", k_scale=1.0, v_scale=1.0,
                 fp8_as_uint8=True, q_len=1):
        gen = torch.Generator(device="cpu").manual_seed(seed)
        self.lens = list(lens)
        self.q_len = q_len
        num_seqs = len(self.lens)
        self.num_heads, self.num_kv_heads, self.head_size, self.block_size = num_heads, num_kv_heads, head_size, block_size
        self.dtype, self.device = dtype, device
        self.kv_cache_dtype, self.k_scale, self.v_scale = kv_cache_dtype, k_scale, v_scale
        self.fp8_dtype = FP8_DTYPES.get(kv_cache_dtype)  # None with "auto"
        self.scale = 1.0 / math.sqrt(head_size)
        x = 16 // torch.tensor([], dtype=self.fp8_dtype or dtype).element_size()
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

        def rand(*size, dtype=dtype):
            return (torch.rand(size, generator=gen) * 2 - 1).to(dtype)

        self.query = rand(num_seqs * q_len, num_heads, head_size).to(device)
        cache_values = torch.float32 if self.fp8_dtype else dtype  # fp8: quantized below, once the NaNs are in
        self.key_cache = rand(num_blocks, num_kv_heads, head_size // x, block_size, x, dtype=cache_values)
        self.value_cache = rand(num_blocks, num_kv_heads, head_size, block_size, dtype=cache_values)
        for b in order[-spare:]:
            self.key_cache[b] = float("nan")
            self.value_cache[b] = float("nan")
        for s, n in enumerate(self.lens):  # the slots past a sequence's end in its last block: NaN too
            if n > 0 and n % block_size:
                last = int(table[s, (n - 1) // block_size])
                self.key_cache[last, :, :, n % block_size:, :] = float("nan")
                self.value_cache[last, :, :, n % block_size:] = float("nan")
        if self.fp8_dtype:
            self.key_cache = (self.key_cache / k_scale).to(self.fp8_dtype)
            self.value_cache = (self.value_cache / v_scale).to(self.fp8_dtype)
            if fp8_as_uint8:
                self.key_cache, self.value_cache = self.key_cache.view(torch.uint8), self.value_cache.view(torch.uint8)
        self.key_cache, self.value_cache = self.key_cache.to(device), self.value_cache.to(device)
        self.block_tables = table.to(device)
        self.seq_lens = torch.tensor(self.lens, dtype=torch.int32, device=device)
        self.alibi_slopes = (torch.tensor([2.0 ** (-8.0 * (h + 1) / num_heads) for h in range(num_heads)],  # vLLM's: positive
                                          dtype=torch.float32, device=device) if alibi else None)
        self.max_seq_len = max(self.lens) if self.lens else 0

    def dequantized(self, cache, cache_scale):
        """A cache as the kernel reads it: float(fp8) * scale for an fp8 cache, in float64; else in float32."""
        if self.fp8_dtype is None:
            return cache.float()
        return cache.view(self.fp8_dtype).float().double() * cache_scale

    def reference(self, lens=None, query=None, k_scale=None, v_scale=None, logits_soft_cap=0.0, sinks=None, window_left=-1,
                  q_len=None):
        """[num_seqs * q_len, num_heads, head_size]: the blocks gathered, a softmax in float32 (float64 for fp8
        caches, dequantized with k_scale and v_scale, by default the problem's); logits soft-capped
        (logits_soft_cap > 0), sinks (float32 [num_heads]) in the denominator and a sliding window (window_left
        >= 0: the last window_left + 1 positions) as pagedattn.decode takes them. q_len (by default the
        problem's): new token i of a sequence of n tokens (row s * q_len + i) sees positions [0, end) with
        end = n - q_len + 1 + i, a window the last window_left + 1 of them, ALiBi relative to end - 1; a row
        with end <= 0 is 0."""
        lens = self.lens if lens is None else lens
        query = self.query if query is None else query
        q_len = self.q_len if q_len is None else q_len
        key = self.dequantized(self.key_cache, self.k_scale if k_scale is None else k_scale)
        value = self.dequantized(self.value_cache, self.v_scale if v_scale is None else v_scale)
        q = query.to(key.dtype)
        assert q.shape[0] == len(lens) * q_len, f"query rows {q.shape[0]}, {len(lens)} sequences * q_len {q_len}"
        out = torch.zeros(q.shape, dtype=key.dtype, device=q.device)
        group = self.num_heads // self.num_kv_heads
        for s, n in enumerate(lens):
            if n <= 0:
                continue
            ids = self.block_tables[s, : -(-n // self.block_size)].long()
            k = key[ids].permute(0, 3, 1, 2, 4).reshape(-1, self.num_kv_heads, self.head_size)[:n]  # [n, kv, d]
            v = value[ids].permute(0, 3, 1, 2).reshape(-1, self.num_kv_heads, self.head_size)[:n]
            k = k.repeat_interleave(group, dim=1)  # [n, heads, d]
            v = v.repeat_interleave(group, dim=1)
            for i in range(q_len):
                end = n - q_len + 1 + i  # the row sees positions [0, end)
                if end <= 0:
                    continue
                row = s * q_len + i
                scores = torch.einsum("hd,nhd->hn", q[row], k[:end]) * self.scale
                if logits_soft_cap > 0:
                    scores = logits_soft_cap * torch.tanh(scores / logits_soft_cap)
                if self.alibi_slopes is not None:
                    scores = scores + self.alibi_slopes[:, None] * (torch.arange(end, device=q.device) - end + 1)[None, :].to(q.dtype)
                if window_left >= 0:
                    scores[:, : max(0, end - 1 - window_left)] = float("-inf")
                if sinks is not None:  # a column of the sinks joins the softmax, its weight dropped (no value)
                    scores = torch.cat([scores, sinks.to(scores.dtype)[:, None]], dim=-1)
                    out[row] = torch.einsum("hn,nhd->hd", torch.softmax(scores, dim=-1)[:, :-1], v[:end])
                else:
                    out[row] = torch.einsum("hn,nhd->hd", torch.softmax(scores, dim=-1), v[:end])
        return out


def vllm_max_seq_len(device=0):
    """vLLM 0.6.3's MAX_SEQ_LEN of its kernel test: the device's opt-in shared memory per block in floats, less
    512 (57600 on an H200: 232448 / 4 - 512); 57600 where torch does not report it."""
    optin = getattr(torch.cuda.get_device_properties(device), "shared_memory_per_block_optin", 0)
    return optin // 4 - 512 if optin else 57600


class VllmProblem:
    """A decode problem as vLLM 0.6.3's test_paged_attention builds it: num_seqs sequences of random lengths in
    [1, max_seq_len], the last exactly max_seq_len; block tables of max_seq_len / block_size entries each, every
    entry drawn uniformly from range(num_blocks) (sequences may share blocks, and a table's entries past its
    sequence's end point anywhere); the query and the caches uniform in [-s, s], s = head_size ** -0.5; ALiBi
    slopes torch.randn(num_heads) (of either sign); scale head_size ** -0.5.

    kv_cache_dtype "auto": caches of the query's dtype. "fp8" (e4m3), "fp8_e4m3" or "fp8_e5m2": uint8 caches as
    vLLM stores them, the fp8 of float16 values uniform in [-s, s], read with k_scale = v_scale = 1.0 (vLLM's
    test). The layouts are vLLM's: key_cache [num_blocks, num_kv_heads, head_size // x, block_size, x] with x
    elements in 16 bytes (as vLLM's test makes it, head_size // x rounded down), value_cache [num_blocks,
    num_kv_heads, head_size, block_size].

    poison: the blocks that no sequence reads (no table entry before its sequence's end names them) are NaN: a
    read of a block outside a sequence shows. Blocks are shared, so the slots past a sequence's end in its last
    block hold values (another sequence may read them)."""

    def __init__(self, num_heads, num_kv_heads, head_size, block_size, dtype, alibi, kv_cache_dtype, max_seq_len, seed,
                 num_seqs=7, num_blocks=4321, poison=True, device="cuda"):
        rng = random.Random(seed)
        gen = torch.Generator(device=device).manual_seed(seed)
        self.num_heads, self.num_kv_heads, self.head_size, self.block_size = num_heads, num_kv_heads, head_size, block_size
        self.dtype, self.device, self.kv_cache_dtype = dtype, device, kv_cache_dtype
        self.fp8_dtype = FP8_DTYPES.get(kv_cache_dtype)  # None with "auto"
        self.k_scale = self.v_scale = 1.0
        self.scale = float(1.0 / head_size ** 0.5)
        bound = head_size ** -0.5

        self.lens = [rng.randint(1, max_seq_len) for _ in range(num_seqs)]
        self.lens[-1] = max_seq_len
        self.max_seq_len = max(self.lens)
        width = -(-self.max_seq_len // block_size)
        table = [[rng.randint(0, num_blocks - 1) for _ in range(width)] for _ in range(num_seqs)]
        self.block_tables = torch.tensor(table, dtype=torch.int32, device=device)
        self.seq_lens = torch.tensor(self.lens, dtype=torch.int32, device=device)

        self.query = torch.empty(num_seqs, num_heads, head_size, dtype=dtype, device=device).uniform_(-bound, bound, generator=gen)
        self.alibi_slopes = torch.randn(num_heads, dtype=torch.float32, device=device, generator=gen) if alibi else None
        x = 16 // (1 if self.fp8_dtype else torch.tensor([], dtype=dtype).element_size())
        key_shape = (num_blocks, num_kv_heads, head_size // x, block_size, x)
        value_shape = (num_blocks, num_kv_heads, head_size, block_size)
        self.key_cache, self.value_cache = (self._random_cache(shape, bound, gen) for shape in (key_shape, value_shape))
        if poison:
            read = torch.zeros(num_blocks, dtype=torch.bool, device=device)
            for s, n in enumerate(self.lens):
                read[self.block_tables[s, : -(-n // block_size)].long()] = True
            unread = (~read).nonzero().flatten()
            self.poisoned_blocks = int(unread.numel())
            # NaN: float NaN, or 0x7F, a NaN of e4m3 and e5m2 alike.
            nan = 0x7F if self.fp8_dtype else float("nan")
            self.key_cache.index_fill_(0, unread, nan)
            self.value_cache.index_fill_(0, unread, nan)

    def _random_cache(self, shape, bound, gen):
        if self.fp8_dtype is None:
            return torch.empty(shape, dtype=self.dtype, device=self.device).uniform_(-bound, bound, generator=gen)
        values = torch.empty(shape, dtype=torch.float16, device=self.device).uniform_(-bound, bound, generator=gen)
        return values.to(self.fp8_dtype).view(torch.uint8)

    def _float64(self, cache, cache_scale):
        """Cache elements in float64: an fp8 cache's as float(fp8) * scale."""
        if self.fp8_dtype is None:
            return cache.double()
        return cache.view(self.fp8_dtype).float().double() * cache_scale

    def reference(self):
        """[num_seqs, num_heads, head_size] float64: each sequence's blocks gathered, dequantized, its softmax in
        float64 with ALiBi's slope * (t - (seq_len - 1)), one sequence at a time (memory: a sequence's keys and
        values in float64)."""
        group = self.num_heads // self.num_kv_heads
        d, bs = self.head_size, self.block_size
        out = torch.empty(self.query.shape, dtype=torch.float64, device=self.device)
        for s, n in enumerate(self.lens):
            ids = self.block_tables[s, : -(-n // bs)].long()
            k = self.key_cache[ids].permute(0, 3, 1, 2, 4).reshape(-1, self.num_kv_heads, d)[:n]  # [n, kv, d]
            k = self._float64(k, self.k_scale)
            q = self.query[s].double().view(self.num_kv_heads, group, d)
            scores = torch.einsum("kgd,nkd->kgn", q, k) * self.scale
            del k
            if self.alibi_slopes is not None:
                position = torch.arange(n, dtype=torch.float64, device=self.device) - (n - 1)
                scores += self.alibi_slopes.double().view(self.num_kv_heads, group, 1) * position
            probs = torch.softmax(scores, dim=-1)
            del scores
            v = self.value_cache[ids].permute(0, 3, 1, 2).reshape(-1, self.num_kv_heads, d)[:n]
            v = self._float64(v, self.v_scale)
            out[s] = torch.einsum("kgn,nkd->kgd", probs, v).reshape(self.num_heads, d)
            del probs, v
        return out


def relative_error(out, ref):
    """Largest relative L2 error over (sequence, head) rows; rows whose reference is 0 compare absolutely."""
    diff = (out.float() - ref).norm(dim=-1)
    norm = ref.norm(dim=-1)
    return float(torch.where(norm > 0, diff / norm.clamp_min(1e-30), diff).max()) if out.numel() else 0.0


def tolerance(dtype):
    return 1e-2 if dtype == torch.bfloat16 else 2e-3
