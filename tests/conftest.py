"""Shared pytest fixtures for findbench's tests."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests._paths import ANCHORS, REPO  # noqa: F401


@pytest.fixture(scope="session")
def embedded_model_dir() -> str:
    """Local folder of the embedded SmolLM2-135M-Instruct (converted from the wheel's GGUF once)."""
    from findbench.models import resolve

    return resolve("embedded")


@pytest.fixture(scope="session")
def embedded_lm(embedded_model_dir):
    """One in-process TransformersLM on the embedded model, shared by the session (CPU, float32)."""
    from findbench.lm import TransformersLM

    return TransformersLM(embedded_model_dir, device="cpu", batch_size=8, name="transformers:embedded")


@pytest.fixture(scope="session")
def anchors_dir() -> Path:
    """``/work/shared/anchors`` (beside the checkout); skips when absent."""
    if not ANCHORS.is_dir():
        pytest.skip(f"anchor data not found at {ANCHORS} (the shared reference data sits beside the checkout)")
    return ANCHORS
