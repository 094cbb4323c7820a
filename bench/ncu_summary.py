#!/usr/bin/env python3
"""Table of the key Nsight Compute metrics of the decode launches that bench/run_gpu_suite.sh profiled.

Usage: ncu_summary.py LOG_DIR COMMIT DEVICE   (reads LOG_DIR/ncu-raw-*.csv, ncu's raw page as CSV)
"""
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


def summarize(path):
    rows = list(csv.reader(path.open()))
    start = next((i for i, r in enumerate(rows) if "gpu__time_duration.sum" in r), None)
    if start is None or len(rows) < start + 3:
        return "no profile (" + (",".join(rows[-1])[:120] if rows and rows[-1] else "empty") + ")"
    header, units, values = rows[start], rows[start + 1], rows[start + 2]
    col = {name: i for i, name in enumerate(header)}

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
    logs, commit, device = pathlib.Path(sys.argv[1]), sys.argv[2], sys.argv[3]
    print(f"# Nsight Compute, one launch per shape (ncu flushes the caches before each replay pass), {device}, commit {commit}")
    for path in sorted(logs.glob("ncu-raw-*.csv")):
        print(f"{path.stem[len('ncu-raw-'):]}: {summarize(path)}")


if __name__ == "__main__":
    main()
