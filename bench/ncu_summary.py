#!/usr/bin/env python3
"""Table of the key Nsight Compute metrics of the decode launches that bench/run_gpu_suite.sh profiled.

Usage: ncu_summary.py LOG_DIR COMMIT DEVICE
           (reads LOG_DIR/ncu-raw-*.csv, ncu's raw page as CSV)
       ncu_summary.py --fold-metrics [--fp32-peak-tflops T] LOG_DIR COMMIT DEVICE
           (reads LOG_DIR/ncu-fold-*.csv: the CUDA-core fold's FP32 FMA count and rate, TFLOP/s at 2 flops per
           FFMA, their share of the fp32 peak (T, default the H200's 67 TFLOP/s; and of the peak at the clock
           the launch ran, where ncu gave it), the FMA pipe's and DRAM's busy share)
"""
import argparse
import csv
import pathlib
import sys

# Stall reasons: cycles per issued instruction spent in each state (WarpStateStats).
STALL_PREFIX = "smsp__average_warps_issue_stalled_"
STALL_SUFFIX = "_per_issue_active.ratio"
# ncu's raw page picks a unit per value: scale to microseconds and to bytes per second.
TIME_US = {"ns": 1e-3, "nsecond": 1e-3, "us": 1.0, "usecond": 1.0, "ms": 1e3, "msecond": 1e3, "s": 1e6, "second": 1e6}
RATE_BPS = {"byte/s": 1.0, "Kbyte/s": 1e3, "Mbyte/s": 1e6, "Gbyte/s": 1e9, "Tbyte/s": 1e12}


def number(text):
    try:
        return float(text.replace(",", ""))
    except ValueError:
        return None


# The H200's non-tensor fp32 rate (NVIDIA's datasheet: 67 TFLOP/s; 132 SMs x 128 lanes x 2 flops x 1.98 GHz).
H200_FP32_PEAK_TFLOPS = 67.0
# SI prefixes of ncu's units ("Ginst", "Mbyte", "cycle/nsecond"; --print-units base leaves none).
PREFIX = {"": 1.0, "K": 1e3, "M": 1e6, "G": 1e9, "T": 1e12, "m": 1e-3, "u": 1e-6, "n": 1e-9}
SECONDS = {"second": 1.0, "s": 1.0, "msecond": 1e-3, "ms": 1e-3, "usecond": 1e-6, "us": 1e-6, "nsecond": 1e-9, "ns": 1e-9}


def base_value(value, unit):
    """A value in ncu's unit, in the base unit (per second for a rate); None for a unit it cannot read."""
    if value is None:
        return None
    num, _, per = unit.partition("/")
    if not per and num.lower().endswith("hz"):
        num, per = num[:-2] + "cycle", "second"
    scale = SECONDS.get(num)  # a duration, in seconds
    for base in ("inst", "byte", "cycle", "warp", "thread", "%", "") if scale is None else ():
        if num.endswith(base) and num[: len(num) - len(base)] in PREFIX:
            scale = PREFIX[num[: len(num) - len(base)]]
            break
    if scale is None:
        return None
    if per:
        if per not in SECONDS:
            return None
        scale /= SECONDS[per]
    return value * scale


def first_launch(path):
    """The first profiled launch in ncu's raw CSV: (header, units, values, {metric: column}), or a line saying
    that there is none."""
    rows = list(csv.reader(path.open()))
    start = next((i for i, r in enumerate(rows) if "gpu__time_duration.sum" in r), None)
    if start is None or len(rows) < start + 3:
        return "no profile (" + (",".join(rows[-1])[:120] if rows and rows[-1] else "empty") + ")"
    header, units, values = rows[start:start + 3]
    return header, units, values, {name: i for i, name in enumerate(header)}


def fold_metrics(path, fp32_peak_tflops):
    """One line of the CUDA-core fold's FP32 FMA rate."""
    launch = first_launch(path)
    if isinstance(launch, str):
        return launch
    _, units, values, col = launch

    def get(metric, per_cycle=False):
        if metric not in col:
            return None
        value = number(values[col[metric]])
        return value if per_cycle else base_value(value, units[col[metric]])  # (a per-cycle peak: as ncu gives it)

    seconds = get("gpu__time_duration.sum")
    ffma = get("sm__sass_thread_inst_executed_op_ffma_pred_on.sum")
    rate = get("smsp__sass_thread_inst_executed_op_ffma_pred_on.sum.per_second")
    if rate is None and ffma is not None and seconds:
        rate = ffma / seconds  # (the count over the launch's duration)
    peak_per_cycle = get("sm__sass_thread_inst_executed_op_ffma_pred_on.sum.peak_sustained", per_cycle=True)
    clock = get("sm__cycles_elapsed.avg.per_second")
    tflops = 2 * rate * 1e-12 if rate is not None else None
    at_clock = 100.0 * rate / (peak_per_cycle * clock) if rate is not None and peak_per_cycle and clock else None
    read = get("dram__bytes_read.sum")
    cells = [
        ("kernel us", seconds * 1e6 if seconds is not None else None, "{:.1f}"),
        ("FFMA", ffma, "{:.4g}"),
        ("FFMA/s G", rate * 1e-9 if rate is not None else None, "{:.0f}"),
        ("TFLOP/s", tflops, "{:.2f}"),
        (f"% of fp32 peak ({fp32_peak_tflops:g} TFLOP/s)", 100.0 * tflops / fp32_peak_tflops if tflops is not None else None, "{:.1f}"),
        ("% of FFMA peak at its clock", at_clock, "{:.1f}"),
        ("SM clock GHz", clock * 1e-9 if clock else None, "{:.2f}"),
        ("FMA pipe %", get("sm__pipe_fma_cycles_active.avg.pct_of_peak_sustained_active"), "{:.1f}"),
        ("issue busy %", get("sm__issue_active.avg.pct_of_peak_sustained_elapsed"), "{:.1f}"),
        ("DRAM %", get("dram__throughput.avg.pct_of_peak_sustained_elapsed"), "{:.1f}"),
        ("DRAM read MB", read * 1e-6 if read is not None else None, "{:.0f}"),
        ("FFMA per DRAM byte", ffma / read if ffma is not None and read else None, "{:.2f}"),
    ]
    return " | ".join(f"{k} -" if v is None else f"{k} " + fmt.format(v) for k, v, fmt in cells)


def summarize(path):
    launch = first_launch(path)
    if isinstance(launch, str):
        return launch
    _, units, values, col = launch

    def get(metric, scales=None):
        if metric not in col:
            return None
        v = number(values[col[metric]])
        if v is None or scales is None:
            return v
        scale = scales.get(units[col[metric]])
        return v * scale if scale is not None else None

    us = get("gpu__time_duration.sum", TIME_US)
    rate = get("dram__bytes.sum.per_second", RATE_BPS)
    cells = {
        "kernel us": us,
        "DRAM MB": rate * us * 1e-12 if rate is not None and us is not None else None,
        "DRAM TB/s": rate * 1e-12 if rate is not None else None,
        "DRAM busy %": get("gpu__dram_throughput.avg.pct_of_peak_sustained_elapsed"),
        "issue busy %": get("sm__issue_active.avg.pct_of_peak_sustained_elapsed"),
        "blocks": get("launch__grid_size"),
        "regs": get("launch__registers_per_thread"),
        "blocks/SM by smem": get("launch__occupancy_limit_shared_mem"),
        "by regs": get("launch__occupancy_limit_registers"),
        "achieved occupancy %": get("sm__warps_active.avg.pct_of_peak_sustained_active"),
        "warp cycles/issue": get("smsp__average_warp_latency_per_inst_issued.ratio"),
    }
    text = " | ".join(f"{k} -" if v is None else f"{k} {v:.0f}" if k in ("blocks", "regs", "blocks/SM by smem", "by regs") else f"{k} {v:.2f}"
                      for k, v in cells.items())
    stalls = []
    for name, i in col.items():
        if name.startswith(STALL_PREFIX) and name.endswith(STALL_SUFFIX):
            v = number(values[i])
            if v:
                stalls.append((v, name[len(STALL_PREFIX):-len(STALL_SUFFIX)]))
    stalls.sort(reverse=True)
    return text + " | stalls per issue: " + ", ".join(f"{reason} {v:.2f}" for v, reason in stalls[:5])


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--fold-metrics", action="store_true", help="summarise LOG_DIR/ncu-fold-*.csv (the FP32 FMA rate)")
    ap.add_argument("--fp32-peak-tflops", type=float, default=H200_FP32_PEAK_TFLOPS,
                    help="the device's non-tensor fp32 peak the FMA rate is a share of (default: the H200's)")
    ap.add_argument("logs", type=pathlib.Path)
    ap.add_argument("commit")
    ap.add_argument("device")
    args = ap.parse_args()
    if args.fold_metrics:
        print(f"# Nsight Compute, the CUDA-core fold's FP32 FMA rate at 64x4096@24/4/256, one launch each (2 flops per FFMA), "
              f"{args.device}, commit {args.commit}")
        for path in sorted(args.logs.glob("ncu-fold-*.csv")):
            print(f"fold {path.stem[len('ncu-fold-'):]}: {fold_metrics(path, args.fp32_peak_tflops)}")
        return
    print(f"# Nsight Compute, one launch per shape (ncu flushes the caches before each replay pass), {args.device}, commit {args.commit}")
    for path in sorted(args.logs.glob("ncu-raw-*.csv")):
        print(f"{path.stem[len('ncu-raw-'):]}: {summarize(path)}")


if __name__ == "__main__":
    main()
