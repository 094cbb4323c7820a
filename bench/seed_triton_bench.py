#!/usr/bin/env python3
"""Times the seed Triton kernel on bench_decode's shape table, with bench_decode's method.

The seed (the Triton V2 kernel pagedattn replaces, a Python module given by --seed-file; it is never part of
the repository) is loaded at run time and only called: this file holds none of its code. Per shape: random data in vLLM's layouts with a
permuted block table, one checked call (its output against an fp64 torch reference on a sample of heads;
the relative error is recorded, not asserted), then the median of individually timed calls, each after an
L2 flush (reading a buffer of 3x the L2 size, not timed), Triton's compilation excluded by warm-up calls.
The device copy bandwidth is measured the same way as bench_decode (cudaMemcpy of 2 GiB, read + write).

    python3 bench/seed_triton_bench.py --seed-file SEED.py --out seed.json [--dtype fp16|bf16] [--quick]

A shape that fails is recorded with its error and the run goes on.
"""
import argparse
import importlib.util
import json
import math
import pathlib
import statistics
import time

import torch

BLOCK_SIZE = 16
PARTITION_TOKENS = 512  # the seed's partition size: sizes tmp_output, exp_sums and max_logits
REFERENCE_PAIRS = 4
HOLD_CYCLES = 2_000_000  # ~1 ms spin before each timed call: the host queues the call meanwhile

# (num_seqs, seq_len, num_heads, num_kv_heads, head_dim): the table of bench/bench_decode.cu.
SHAPES = [
    (1, 100000, 24, 4, 256), (1, 16384, 24, 4, 256), (8, 32768, 24, 4, 256), (32, 8192, 24, 4, 256),
    (64, 4096, 24, 4, 256), (256, 1024, 24, 4, 256), (1, 100000, 24, 4, 128), (64, 4096, 24, 4, 128),
    (1, 100000, 32, 8, 128), (64, 4096, 32, 8, 128), (1, 1000, 24, 4, 256), (4, 2049, 24, 4, 256),
    (1, 4096, 24, 4, 256),
]
DTYPES = {"fp16": torch.float16, "bf16": torch.bfloat16}


def load_seed(path):
    spec = importlib.util.spec_from_file_location("seed_paged_attention_v2_triton", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.paged_attention_v2_triton


class Problem:
    """One decode step in vLLM's layouts; the seed's scratch buffers sized by 512-token partitions."""

    def __init__(self, shape, dtype, device, seed=2026):
        num_seqs, seq_len, num_heads, num_kv_heads, head_dim = shape
        self.shape, self.seq_len, self.num_heads, self.num_kv_heads = shape, seq_len, num_heads, num_kv_heads
        self.scale = 1.0 / math.sqrt(head_dim)
        x = 16 // torch.tensor([], dtype=dtype).element_size()
        blocks_per_seq = -(-seq_len // BLOCK_SIZE)
        num_blocks = num_seqs * blocks_per_seq
        gen = torch.Generator(device=device).manual_seed(seed)

        def uniform(*size):
            return torch.empty(size, dtype=dtype, device=device).uniform_(-1, 1, generator=gen)

        self.query = uniform(num_seqs, num_heads, head_dim).mul_(3)  # x3: a softmax that is not flat
        self.key_cache = uniform(num_blocks, num_kv_heads, head_dim // x, BLOCK_SIZE, x)
        self.value_cache = uniform(num_blocks, num_kv_heads, head_dim, BLOCK_SIZE)
        # A random permutation of the blocks: every sequence's blocks are scattered over the cache.
        perm = torch.randperm(num_blocks, generator=torch.Generator().manual_seed(seed))
        self.block_tables = perm.to(torch.int32).view(num_seqs, blocks_per_seq).to(device)
        self.seq_lens = torch.full((num_seqs,), seq_len, dtype=torch.int32, device=device)
        parts = -(-seq_len // PARTITION_TOKENS)
        self.output = torch.empty_like(self.query)
        self.tmp_output = torch.empty(num_seqs, num_heads, parts, head_dim, dtype=dtype, device=device)  # as vLLM: output dtype
        self.exp_sums = torch.empty(num_seqs, num_heads, parts, dtype=torch.float32, device=device)
        self.max_logits = torch.empty_like(self.exp_sums)

    def run(self, seed_fn):
        seed_fn(self.output, self.exp_sums, self.max_logits, self.tmp_output, self.query, self.key_cache,
                self.value_cache, self.num_kv_heads, self.scale, self.block_tables, self.seq_lens, BLOCK_SIZE,
                self.seq_len, None)

    def reference(self, seq, head):
        """fp64 attention of (seq, head), gathering its tokens through the block table."""
        kv_head = head // (self.num_heads // self.num_kv_heads)
        ids = self.block_tables[seq].long()
        k = self.key_cache[ids, kv_head]  # [blocks][head_dim / x][block_size][x]
        k = k.permute(0, 2, 1, 3).reshape(-1, k.shape[1] * k.shape[3])[: self.seq_len].double()
        v = self.value_cache[ids, kv_head]  # [blocks][head_dim][block_size]
        v = v.permute(0, 2, 1).reshape(-1, v.shape[1])[: self.seq_len].double()
        weights = torch.softmax((k @ self.query[seq, head].double()) * self.scale, dim=0)
        return weights @ v

    def sample_pairs(self, n=REFERENCE_PAIRS):
        """bench_decode's sample: n (seq, head) pairs spread over the sequences and the heads."""
        den = max(1, n - 1)
        return [(i * (self.shape[0] - 1) // den, i * (self.num_heads - 1) // den) for i in range(n)]

    def max_relative_error(self):
        worst = 0.0
        for seq, head in self.sample_pairs():
            ref = self.reference(seq, head)
            err = ((self.output[seq, head].double() - ref).norm() / ref.norm()).item()
            worst = max(worst, err if math.isfinite(err) else math.inf)
        return worst


def flush_buffer():
    """A zeroed buffer of 3x the L2 size: reading it evicts the previous call's data from L2 and leaves
    clean lines (as bench_decode's L2Flush: no write-back of dirty lines lands in the timed call)."""
    l2 = torch.cuda.get_device_properties(0).L2_cache_size
    return torch.zeros(3 * l2, dtype=torch.uint8, device="cuda")


def copy_gbps(nbytes=2 << 30, reps=20):
    """Device-to-device copy bandwidth (GB/s, bytes read + written), median of reps timed copies."""
    src = torch.ones(nbytes, dtype=torch.uint8, device="cuda")
    dst = torch.empty_like(src)
    dst.copy_(src)
    times = []
    for _ in range(reps):
        start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        dst.copy_(src)
        stop.record()
        stop.synchronize()
        times.append(start.elapsed_time(stop))
    return 2 * nbytes / (statistics.median(times) * 1e-3) / 1e9


def median_us(fn, n, flush):
    """Median of n individually timed calls, each after an L2 flush (outside the timed interval)."""
    times = []
    for _ in range(n):
        start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        torch.cuda._sleep(HOLD_CYCLES)
        flush.max()  # a reduction: reads the whole buffer
        start.record()
        fn()
        stop.record()
        stop.synchronize()
        times.append(start.elapsed_time(stop) * 1e3)
    return statistics.median(times)


def bench_shape(shape, dtype_name, seed_fn, launches, flush):
    num_seqs, seq_len, num_heads, num_kv_heads, head_dim = shape
    row = {"shape": f"{num_seqs}x{seq_len}", "heads": f"{num_heads}/{num_kv_heads}", "head_dim": head_dim,
           "dtype": dtype_name, "num_seqs": num_seqs, "seq_len": seq_len, "seed_us": None, "seed_rel_err": None}
    try:
        p = Problem(shape, DTYPES[dtype_name], "cuda")
        t0 = time.time()
        p.run(seed_fn)  # compiles the seed's kernels for this shape
        torch.cuda.synchronize()
        row["compile_s"] = round(time.time() - t0, 2)
        err = p.max_relative_error()
        row["seed_rel_err"] = err if math.isfinite(err) else None
        if not math.isfinite(err):
            row["note"] = "non-finite output"
        row["seed_us"] = median_us(lambda: p.run(seed_fn), launches, flush)
    except Exception as e:  # record and go on: one shape must not end the run
        row["error"] = f"{type(e).__name__}: {e}"[:500]
    return row


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True, help="JSON file to write")
    ap.add_argument("--dtype", choices=sorted(DTYPES), default="fp16")
    ap.add_argument("--quick", action="store_true", help="10 timed calls per shape instead of 100")
    ap.add_argument("--seed-file", required=True, help="the seed Triton V2 kernel, a Python module")
    args = ap.parse_args()
    if not torch.cuda.is_available():
        raise SystemExit("no CUDA device: the seed benchmark needs an NVIDIA GPU")

    seed_fn = load_seed(args.seed_file)
    launches = 10 if args.quick else 100
    flush = flush_buffer()
    result = {"device": torch.cuda.get_device_name(0), "copy_gbps": copy_gbps(), "dtype": args.dtype,
              "torch": torch.__version__, "launches": launches, "l2_flush_bytes": flush.numel(),
              "median_method": "median of individually timed calls (torch.cuda.Event pair each), "
                               "L2 flushed (by reading l2_flush_bytes) before each, flush not timed",
              "rows": []}
    print(f"{result['device']}: copy {result['copy_gbps']:.0f} GB/s (read + write); seed, {args.dtype}, "
          f"{launches} calls per shape")
    print(f"{'shape':<10} {'heads':<6} {'head':>5} {'seed_us':>10} {'rel_err':>9} {'compile_s':>9}")
    for shape in SHAPES:
        row = bench_shape(shape, args.dtype, seed_fn, launches, flush)
        result["rows"].append(row)
        pathlib.Path(args.out).write_text(json.dumps(result, indent=1))  # after every shape: a timeout keeps the rest
        us, err = row["seed_us"], row["seed_rel_err"]
        print(f"{row['shape']:<10} {row['heads']:<6} {row['head_dim']:>5} "
              f"{'-' if us is None else f'{us:.1f}':>10} {'-' if err is None else f'{err:.2e}':>9} "
              f"{row.get('compile_s', '-'):>9}  {row.get('error', row.get('note', ''))}", flush=True)
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
