"""Keras 3 `model.fit` on the torch backend (corpus generator program): its own progress
lines (`8/8 ━━━━ 0s 2ms/step - loss: 0.91`), verbose=1 bars or verbose=2 epoch lines.

Usage: KERAS_BACKEND=torch python keras_run.py MODE [--verbose 1|2]. MODE: healthy, nan
(the targets hold a NaN from the third epoch: `loss: nan`), terminate (the same with
keras.callbacks.TerminateOnNaN, which stops the run and says so), shape (from epoch 2 the
batches are narrower: Keras raises), tempting (a healthy run whose metrics and callbacks print
nan/error words).
"""

from __future__ import annotations

import sys

import keras
import numpy as np


class NanFromEpoch(keras.utils.PyDataset):
    """Batches of a linear task; from epoch 3 one target is NaN (a corrupt label)."""

    def __init__(self, nan_from: int | None, narrow_from: int | None = None, **kw):
        super().__init__(**kw)
        rng = np.random.default_rng(0)
        self.x = rng.standard_normal((128, 8)).astype("float32")
        self.narrow_from = narrow_from
        self.y = self.x.sum(-1, keepdims=True)
        self.nan_from = nan_from
        self.epoch = 0

    def __len__(self):
        return 8

    def on_epoch_end(self):
        self.epoch += 1

    def __getitem__(self, i):
        x, y = self.x[i * 16:(i + 1) * 16], self.y[i * 16:(i + 1) * 16].copy()
        if self.nan_from is not None and self.epoch + 1 >= self.nan_from:
            y[0, 0] = np.nan
        if self.narrow_from is not None and self.epoch + 1 >= self.narrow_from:
            x = x[:, :5]   # a feature column dropped upstream
        return x, y


class ErrorRate(keras.callbacks.Callback):
    def on_epoch_end(self, epoch, logs=None):
        print(f"epoch {epoch + 1}: error_rate=0.00 nan_batches=0 oom_retries=0 (ErrorRate callback)", flush=True)


def main() -> None:
    mode = sys.argv[1]
    verbose = int(sys.argv[sys.argv.index("--verbose") + 1]) if "--verbose" in sys.argv else 1
    keras.utils.set_random_seed(0)
    model = keras.Sequential([keras.Input((8,)), keras.layers.Dense(16, activation="relu"), keras.layers.Dense(1)])
    model.compile(optimizer=keras.optimizers.SGD(1e-2), loss="mse", metrics=["mae"])
    callbacks = [keras.callbacks.TerminateOnNaN()] if mode == "terminate" else []
    if mode == "tempting":
        callbacks.append(ErrorRate())
    data = NanFromEpoch(3 if mode in ("nan", "terminate") else None, narrow_from=2 if mode == "shape" else None)
    model.fit(data, epochs=5, verbose=verbose, callbacks=callbacks)
    print("fit done", flush=True)


if __name__ == "__main__":
    main()
