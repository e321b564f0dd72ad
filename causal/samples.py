"""Sampled latents: a float32 matrix of named columns, the class column, and the row ids."""

from __future__ import annotations

import csv
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np

from ident3d.causal.errors import UserError


@dataclass(frozen=True)
class Samples:
    """Rows ``index`` of an SCM: ``latents`` (N x D float32), ``classes`` (N int64 or None).

    ``index`` holds the global row ids so later random draws (latent transformations) stay
    counter-based and split-invariant too.
    """

    latents: np.ndarray
    classes: np.ndarray | None
    names: list[str]
    index: np.ndarray
    class_name: str | None = None
    class_names: list[str] | None = None

    def __len__(self) -> int:
        return len(self.index)

    def column(self, name: str) -> np.ndarray:
        """One latent column (or the class column) by name."""
        if name == self.class_name and self.classes is not None:
            return self.classes
        return self.latents[:, self.names.index(name)]

    def values(self) -> dict[str, np.ndarray]:
        """Every node's values as float64 arrays, keyed by node name (class as its index)."""
        out = {n: self.latents[:, j].astype(np.float64) for j, n in enumerate(self.names)}
        if self.class_name is not None and self.classes is not None:
            out[self.class_name] = self.classes.astype(np.float64)
        return out

    def with_latents(self, latents: np.ndarray, classes: np.ndarray | None) -> Samples:
        """A copy with new values for the same rows (what a transformation returns)."""
        return replace(self, latents=latents, classes=classes)

    def save(self, path: str | Path) -> Path:
        """Write to ``.npz`` (arrays + names) or ``.csv`` (header row, class as its name)."""
        path = Path(path)
        if path.suffix == ".npz":
            extra = {} if self.classes is None else {
                "classes": self.classes, "class_names": np.array(self.class_names)}
            np.savez(path, latents=self.latents, names=np.array(self.names), index=self.index,
                     **extra)
        elif path.suffix == ".csv":
            with path.open("w", newline="") as fh:
                w = csv.writer(fh)
                head = ["index"] + ([self.class_name] if self.classes is not None else [])
                w.writerow(head + self.names)
                for i in range(len(self)):
                    cls = [self.class_names[self.classes[i]]] if self.classes is not None else []
                    w.writerow([int(self.index[i])] + cls + [repr(float(v)) for v in self.latents[i]])
        else:
            raise UserError(f"cannot write {path}: use a .npz or .csv file name")
        return path
