"""One registry style (``ident3d.causal.registry.Registry``) for datasets, DA recipes, built-in meshes and mesh file
formats: every entry is listed with its one-line docstring, an unknown name is one line naming the choices, and a
registry that keeps registration order lists its entries in it."""

from __future__ import annotations

import pytest

from ident3d.causal.errors import UserError
from ident3d.causal.registry import Registry
from ident3d.ingest.datasets import DATASETS
from ident3d.render.builtin_meshes import BUILTIN_MESHES
from ident3d.render.mesh_formats import MESH_FORMATS
from ident3d.training.views.augment import DA_RECIPES

EXPECTED = {  # each registry, with its entries in the order it lists them
    DATASETS: ["celeba", "cifar10", "digits", "digits_canvas", "emnist", "fashionmnist", "mnist", "mnist5k",
               "mnist5k_canvas", "mnist_canvas"],
    DA_RECIPES: ["crop_large", "crop_small", "rotation", "colour"],
    BUILTIN_MESHES: ["teapot", "monkey", "torus", "cone", "icosphere", "cylinder", "cube"],
    MESH_FORMATS: [".obj", ".ply", ".stl", ".gltf", ".glb", ".blend"],
}
REGISTRIES = pytest.mark.parametrize("registry", list(EXPECTED), ids=lambda r: r.kind)


@REGISTRIES
def test_a_registry_lists_its_entries_in_order_each_with_a_one_line_docstring(registry: Registry):
    assert registry.names() == list(registry) == EXPECTED[registry]
    for name, doc in registry.describe():
        assert name in registry and doc.endswith(".") and "\n" not in doc, (name, doc)
        assert registry.get(name).registry_name == name


@REGISTRIES
def test_an_unknown_name_is_one_line_naming_the_choices(registry: Registry):
    with pytest.raises(UserError) as err:
        registry.get("no_such_entry")
    msg = str(err.value)
    assert "\n" not in msg and f"unknown {registry.kind} 'no_such_entry'" in msg
    assert f"choose one of: {', '.join(EXPECTED[registry])} (see {registry.hint})" in msg
    assert "no_such_entry" not in registry


def test_the_dataset_registry_sees_every_module_of_its_package():
    """Importing the registry's own module imports the package, whose ``__init__`` imports every module in it."""
    import subprocess
    import sys

    code = ("from ident3d.ingest.datasets.base import DATASETS; "
            "print(' '.join(sorted({c.__module__.rsplit('.', 1)[1] for _, c in DATASETS.items()})))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.split() == ["bundled", "canvas", "torchvision_sets"]


def test_a_registration_twice_is_refused_and_a_refused_entry_is_left_out():
    reg = Registry("thing", hint="nowhere", sort=False)

    @reg.register("b")
    class B:
        """The second letter."""

    reg.register("a")(type("A", (), {"__doc__": "The first letter."}))
    assert reg.names() == ["b", "a"] and reg.describe() == [("b", "The second letter."), ("a", "The first letter.")]
    with pytest.raises(ValueError, match="thing 'b' registered twice"):
        reg.register("b")(B)
    reg.unregister("a")
    assert list(reg) == ["b"]

    class Picky(Registry):
        def added(self, name: str, cls: type) -> None:
            raise ValueError(f"{name} refused")

    picky = Picky("thing", hint="nowhere")
    with pytest.raises(ValueError, match="c refused"):
        picky.register("c")(B)
    assert "c" not in picky and picky.names() == []
