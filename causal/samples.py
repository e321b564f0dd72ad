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
    counter-based and split-invariant too. An SCM with object plates also gives ``present`` (N x K bool:
    which slots hold an object; absent objects' latents are 0) and ``objects`` (each slot's node names).
    """

    latents: np.ndarray
    classes: np.ndarray | None
    names: list[str]
    index: np.ndarray
    class_name: str | None = None
    class_names: list[str] | None = None
    present: np.ndarray | None = None
    objects: tuple[tuple[str, ...], ...] | None = None

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

    def with_latents(self, latents: np.ndarray, classes: np.ndarray | None,
                     present: np.ndarray | None = None) -> Samples:
        """A copy with new values for the same rows (what a transformation returns); ``present`` kept if None."""
        return replace(self, latents=latents, classes=classes,
                       present=self.present if present is None else present)

    def object_latents(self) -> np.ndarray:
        """(N, K, D) float32: every slot's nodes in template order, absent objects all 0 (Brady et al.'s layout)."""
        if self.objects is None:
            raise UserError("these samples have no objects: the SCM declares no 'objects:' and 'object_nodes:'")
        values = self.values()
        return np.stack([np.stack([values[n] for n in names], axis=1) for names in self.objects],
                        axis=1).astype(np.float32)

    def save(self, path: str | Path) -> Path:
        """Write to ``.npz`` (arrays + names) or ``.csv`` (header row, class as its name)."""
        path = Path(path)
        if path.suffix == ".npz":
            extra = {} if self.classes is None else {
                "classes": self.classes, "class_names": np.array(self.class_names)}
            if self.present is not None:
                extra["present"] = self.present
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
