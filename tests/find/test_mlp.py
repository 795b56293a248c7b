"""The batched MLP fitter, the reference recipe and state-dict conversion."""

from __future__ import annotations

import numpy as np
import pytest

from findbench.find import mlp

X = np.linspace(-100, 100, 2000)
TARGETS = np.stack(
    [
        26.8 * np.abs(X) - 8.2,  # FIND f00000
        -20.7 * np.where(X > 0, X, 0.7 * X) - 5.2,  # FIND f00001
        3.5 * np.tanh((2 * np.pi / 3.4) * (X - 5.4)) + 6.0,  # FIND f00004
        0.02 * X**2 - 3.0,
    ]
)


@pytest.fixture(scope="module")
def fitted():
    return mlp.fit_mlps(X, TARGETS, seed=0, epochs=60)


def test_fit_mlps_shapes_and_small_error(fitted):
    w = fitted
    assert w["w1"].shape == w["b1"].shape == w["w2"].shape == (4, 64)
    assert w["b2"].shape == (4,) and all(w[k].dtype == np.float32 for k in ("w1", "b1", "w2", "b2"))
    for i in range(4):
        pred = mlp.mlp_forward(w["w1"][i], w["b1"][i], w["w2"][i], w["b2"][i], X)
        mse = np.mean((pred - TARGETS[i]) ** 2)
        assert mse == pytest.approx(w["mse"][i], rel=1e-9, abs=1e-12)
        assert mse < 1e-4 * TARGETS[i].var(), i
    # piecewise-linear targets are (almost) exactly representable
    assert w["mse"][0] < 1e-3 and w["mse"][1] < 1e-3


def test_fit_mlps_is_bit_reproducible(fitted):
    again = mlp.fit_mlps(X, TARGETS, seed=0, epochs=60)
    for k in ("w1", "b1", "w2", "b2"):
        assert fitted[k].tobytes() == again[k].tobytes()


def test_fit_mlps_beats_reference_recipe_on_same_function():
    x = np.linspace(-100, 100, 500)
    y = 3.5 * np.tanh((2 * np.pi / 3.4) * (x - 5.4)) + 6.0
    ref = mlp.reference_fit(x, y, seed=0, epochs=300)
    ours = mlp.fit_mlps(x, y, seed=0, epochs=30)
    assert ref["w1"].shape == (64,) and isinstance(ref["mse"], float)
    assert ours["mse"][0] <= ref["mse"]
    assert ref["mse"] == pytest.approx(
        np.mean((mlp.mlp_forward(ref["w1"], ref["b1"], ref["w2"], ref["b2"], x) - y) ** 2)
    )


def test_zero_epochs_is_least_squares_only_and_refinement_never_hurts():
    x = np.linspace(-1, 1, 400)
    ys = np.stack([np.sin(9 * x), np.where(x > 0.3, 1.0, 0.0)])
    ls = mlp.fit_mlps(x, ys, seed=1, epochs=0)
    refined = mlp.fit_mlps(x, ys, seed=1, epochs=40)
    assert np.all(refined["mse"] <= ls["mse"])


def test_state_dict_round_trip_matches_torch_forward():
    import torch

    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(1, 64), torch.nn.ReLU(), torch.nn.Linear(64, 1))
    sd = {"layers." + k: v for k, v in model.state_dict().items()}
    w = mlp.weights_from_state_dict(sd)
    x = np.linspace(-3, 3, 50)
    expected = model(torch.tensor(x, dtype=torch.float32)[:, None]).detach().numpy()[:, 0]
    np.testing.assert_allclose(mlp.mlp_forward(w["w1"], w["b1"], w["w2"], w["b2"], x), expected, rtol=1e-5, atol=1e-5)


def test_float32_list_is_exact_and_short():
    vals = np.array([0.1, -1 / 3, 12345.678], dtype=np.float32)
    out = mlp.float32_list(vals)
    assert np.array_equal(np.asarray(out, dtype=np.float32), vals)
    assert all(len(repr(v)) <= 12 for v in out)


def test_bad_input_names_the_argument():
    with pytest.raises(ValueError, match="ys must be finite"):
        mlp.fit_mlps(X, np.full((1, X.size), np.inf), seed=0, epochs=0)
    with pytest.raises(ValueError, match="xs has shape"):
        mlp.fit_mlps(X[:10], TARGETS, seed=0, epochs=0)
    with pytest.raises(ValueError, match="state_dict is missing"):
        mlp.weights_from_state_dict({"layers.0.weight": np.zeros((64, 1))})
    with pytest.raises(ValueError, match="x and y"):
        mlp.reference_fit([1.0, 2.0], [1.0], seed=0)
