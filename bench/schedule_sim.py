#!/usr/bin/env python3
"""How long a decode launch of given lengths takes for each partition size, by simulation, and which size
the schedule model (agent/decode_schedule.cuh) picks at several fixed costs
(bench/NOTES.md, "Length-aware scheduling: the device plan").
No GPU and no packages needed.

The simulated launch: W thread blocks (264: 132 SMs x 2) take the work items in ticket order (sequence
by sequence, as the device plan lays them out); each item first spends `overhead_us` without streaming
(prologue, first round trip, combine), then streams its tokens' K and V. Streaming blocks share the copy
bandwidth (4.26 TB/s) and none exceeds a block's own limit (18 GB/s: two 32 KB stages over a ~1.8 us
round trip). Calibrated on main's uniform rows with overhead 9 us: 1x100000 105 us (measured 107),
64x4096 261 (259), 1x16384 24.8 (26.3), 4x2049 18.1 (18.0).

  python3 bench/schedule_sim.py            # the serving rows, the mixes in two orders, the model's regret over random batches
"""
import math
import random
import sys

BANDWIDTH = 4.26e6      # bytes per microsecond
BLOCK_LIMIT = 18e3      # bytes per microsecond, one block
WAVE = 264              # blocks resident at once
TOKEN_BYTES = 1024      # K and V of one token of one KV head: head 256, fp16
SEGMENTS = 4            # KV heads of Qwen3.6 (24/4 heads)
LIMIT = 4096            # the policy's longest partition


def item_bytes(lens, t):
    """Each work item's bytes, in ticket order (an empty sequence still has one item)."""
    out = []
    for length in lens:
        parts = max(1, math.ceil(length / t))
        for _ in range(SEGMENTS):
            out += [max(0, min(t, length - p * t)) * TOKEN_BYTES for p in range(parts)]
    return out


def makespan_us(items, overhead_us):
    """Fluid simulation of the persistent grid (or of a grid per item: blocks start in index order)."""
    now, nxt, blocks = 0.0, 0, []
    while nxt < len(items) and len(blocks) < WAVE:
        blocks.append(["prologue", overhead_us, items[nxt]])
        nxt += 1
    while blocks:
        streaming = sum(1 for b in blocks if b[0] == "stream")
        rate = min(BLOCK_LIMIT, BANDWIDTH / streaming) if streaming else 0.0
        step = min(b[1] if b[0] == "prologue" else b[1] / rate for b in blocks)
        now += step
        kept = []
        for b in blocks:
            b[1] -= step if b[0] == "prologue" else step * rate
            if b[0] == "prologue" and b[1] <= 1e-9:
                b[0], b[1] = "stream", b[2]
            if b[0] == "stream" and b[1] <= 1e-6:
                if nxt < len(items):
                    kept.append(["prologue", overhead_us, items[nxt]])
                    nxt += 1
                continue
            kept.append(b)
        blocks = kept
    return now


def wave_model_choice(lens, fixed_tokens):
    """The schedule model: the multiple of 32 with the least ceil(items / W) * (t + fixed), longer on ties."""
    top = min(LIMIT, max(32, (max(lens) + 31) // 32 * 32))
    best = None
    for t in range(top, 31, -32):
        items = sum(SEGMENTS * max(1, math.ceil(length / t)) for length in lens)
        cost = math.ceil(items / WAVE) * (t + fixed_tokens)
        if best is None or cost < best[0]:
            best = (cost, t)
    return best[1]


def item_tokens(lens, t):
    """Each work item's tokens, in ticket order (an empty sequence still has one item, of 0 tokens)."""
    out = []
    for length in lens:
        parts = max(1, math.ceil(length / t))
        for _ in range(SEGMENTS):
            out += [max(0, min(t, length - p * t)) for p in range(parts)]
    return out


def ticket_group_choice(lens, fixed_tokens):
    """A model that costs items by their own length: the items in ticket order, cut into groups of W (the blocks
    that start together), each group costing its longest item plus the fixed cost; the least sum, longer on ties.
    On uniform lengths it is the wave model."""
    top = min(LIMIT, max(32, (max(lens) + 31) // 32 * 32))
    best = None
    for t in range(top, 31, -32):
        items = item_tokens(lens, t)
        cost = sum(max(items[i:i + WAVE]) + fixed_tokens for i in range(0, len(items), WAVE))
        if best is None or cost < best[0]:
            best = (cost, t)
    return best[1]


def grid(lens):
    top = min(LIMIT, max(32, (max(lens) + 31) // 32 * 32))
    return [t for t in range(top, 31, -32) if t % 128 == 0 or t <= 256]


def random_batches(seed, count=40):
    rng = random.Random(seed)
    out = []
    for k in range(count):
        kind = k % 4
        if kind == 0:    # a few long sequences among many short ones
            lens = [rng.randint(50, 2000) for _ in range(rng.choice([16, 32, 64, 128]))]
            for j in range(rng.randint(1, 3)):
                lens[j] = rng.randint(16000, 131072)
        elif kind == 1:  # log-uniform
            lo, hi = rng.choice([(16, 8192), (100, 100000), (1000, 32768)])
            lens = [round(math.exp(rng.uniform(math.log(lo), math.log(hi)))) for _ in range(rng.choice([8, 32, 64, 256]))]
        elif kind == 2:  # nearly uniform
            base = rng.choice([1000, 4096, 16384])
            lens = [max(1, int(base * rng.uniform(0.8, 1.0))) for _ in range(rng.choice([4, 16, 64, 256]))]
        else:            # two modes
            lens = [rng.choice([rng.randint(100, 1000), rng.randint(8000, 40000)]) for _ in range(rng.choice([32, 64, 128]))]
        out.append(lens)
    return out


def main():
    overhead_us = 9.0
    serving = {"1x100000+63x512": [100000] + [512] * 63, "1x32768+63x100": [32768] + [100] * 63}
    fixed_candidates = (64, 128, 160, 256, 320)
    for name, lens in serving.items():
        sims = {t: makespan_us(item_bytes(lens, t), overhead_us) for t in grid(lens)}
        best = min(sims, key=sims.get)
        copy_us = sum(lens) * SEGMENTS * TOKEN_BYTES / BANDWIDTH
        picks = ", ".join(f"fixed {f} KB: {wave_model_choice(lens, f)} ({makespan_us(item_bytes(lens, wave_model_choice(lens, f)), overhead_us):.0f} us)"
                          for f in fixed_candidates)
        grouped = ticket_group_choice(lens, 64)
        print(f"{name}: copy speed {copy_us:.1f} us; best {best} tokens {sims[best]:.0f} us; model picks {picks}; "
              f"the ticket-group model (fixed 64 KB) {grouped} ({makespan_us(item_bytes(lens, grouped), overhead_us):.0f} us)")
    # Longest first: the same lengths, the items of the longest sequences drawn first.
    rng = random.Random(1)
    mixes = {"64 x log-uniform [100, 100000]": [round(math.exp(rng.uniform(math.log(100), math.log(100000)))) for _ in range(64)],
             "256 x log-uniform [16, 8192]": [round(math.exp(rng.uniform(math.log(16), math.log(8192)))) for _ in range(256)]}
    for name, lens in mixes.items():
        for order, batch in (("as given", lens), ("longest first", sorted(lens, reverse=True))):
            sims = {t: makespan_us(item_bytes(batch, t), overhead_us) for t in grid(batch)}
            best = min(sims, key=sims.get)
            pick = wave_model_choice(batch, 64)
            print(f"{name}, {order}: best {best} tokens {sims[best]:.0f} us; the wave model (fixed 64 KB) {pick} "
                  f"({makespan_us(item_bytes(batch, pick), overhead_us):.0f} us)")
    batches = random_batches(7)
    sims = []
    for lens in batches:
        sims.append({t: makespan_us(item_bytes(lens, t), overhead_us) for t in grid(lens)})
        print(".", end="", file=sys.stderr, flush=True)
    print(file=sys.stderr)
    for f in fixed_candidates:
        regrets = []
        for lens, sim in zip(batches, sims):
            pick = wave_model_choice(lens, f)
            pick_us = sim[pick] if pick in sim else makespan_us(item_bytes(lens, pick), overhead_us)
            regrets.append(pick_us / min(sim.values()) - 1)
        print(f"fixed cost {f} KB: the model's choice is {100 * sum(regrets) / len(regrets):.1f} % slower than the best on average, "
              f"{100 * max(regrets):.1f} % at worst ({len(batches)} random batches)")


if __name__ == "__main__":
    main()
