import os
import pathlib
import sys

import pytest

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))


def pytest_configure(config):
    config.addinivalue_line("markers", "host: plain Python, runs without torch or a CUDA device")


def pytest_collection_modifyitems(config, items):
    """Without torch or a CUDA device every test is skipped (CI has neither) but those marked host. With a device
    the package must import: a broken build fails every test instead of skipping it."""
    try:
        import torch
    except ImportError as e:
        reason = f"torch is not importable: {e}"
    else:
        if not torch.cuda.is_available():
            reason = "no CUDA device"
        else:
            import pagedattn  # noqa: F401  (an ImportError here fails the run: the build is broken)
            return
    for item in items:
        if item.get_closest_marker("host") is None:
            item.add_marker(pytest.mark.skip(reason=reason))
