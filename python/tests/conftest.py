import pathlib
import sys

import pytest

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))


def pytest_collection_modifyitems(config, items):
    """Without torch, a CUDA device or the built package every test is skipped (CI has none of them)."""
    reason = None
    try:
        import torch
        if not torch.cuda.is_available():
            reason = "no CUDA device"
        else:
            import pagedattn  # noqa: F401
    except ImportError as e:
        reason = f"not importable: {e}"
    if reason:
        for item in items:
            item.add_marker(pytest.mark.skip(reason=reason))
