"""Builds pagedattn._C, the PyTorch operators of pagedattn, from the library's headers in ../include.

    pip install --no-build-isolation ./python      (from the repository's root; uses the installed torch)

The CUDA architectures are PyTorch's choice: TORCH_CUDA_ARCH_LIST, else the GPUs present. Extra nvcc
flags come from PAGEDATTN_NVCC_FLAGS (for BI-V100 with the CoreX toolchain: "-D__ILUVATAR__").
"""
import os
import pathlib

from setuptools import setup
from torch.utils.cpp_extension import BuildExtension, CUDAExtension

here = pathlib.Path(__file__).resolve().parent
include = here.parent / "include"
if not (include / "pagedattn" / "pagedattn.cuh").is_file():
    raise RuntimeError(f"pagedattn's headers are not at {include}: build from a checkout of the repository (pip install ./python)")

extra_nvcc = os.environ.get("PAGEDATTN_NVCC_FLAGS", "").split()
setup(
    ext_modules=[
        CUDAExtension(
            "pagedattn._C",
            # The fp8 pairs of query and cache types in translation units of their own: built side by side
            # (ninja; MAX_JOBS caps the jobs), each takes about as long as torch_ops.cu's pairs together.
            ["csrc/torch_ops.cu", "csrc/decode_fp16_e4m3.cu", "csrc/decode_fp16_e5m2.cu", "csrc/decode_bf16_e4m3.cu",
             "csrc/decode_bf16_e5m2.cu"],
            include_dirs=[str(include), str(here / "csrc")],
            # No -std flag: PyTorch adds the standard its headers need (C++17 or later, which pagedattn needs too).
            extra_compile_args={"cxx": ["-O3"], "nvcc": ["-O3", "--expt-relaxed-constexpr"] + extra_nvcc},
        )
    ],
    cmdclass={"build_ext": BuildExtension},
)
