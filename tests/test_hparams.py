"""Issue 20, items 5 and 6: numbers are read as a researcher writes them (one reader for --hp, --encoder-arg and
every config file), and every hyperparameter / encoder option is checked against the one declaration in the
signature that takes it: a bad value is one line naming the key, the value and what is expected (exit 2, nothing
written); ``train --list`` shows the same declarations."""

import json

import pytest
import yaml
from helpers import run_cli

from ident3d.causal.errors import UserError

TINY_SYNTHETIC = {
    "name": "tiny", "seeds": [0],
    "train": {"objective": "lp_infonce", "encoder": "mlp", "encoder_args": {"hidden": [16, 16]}, "out_dim": 3,
              "steps": 40, "batch_size": 64, "lr": 0.003, "amp": False, "log_every": 10},
    "evaluate": {"fit": 500, "score": 500},
    "rows": [{"name": "box normal", "source": {"kind": "latent_pairs", "space": "box", "conditional": "normal",
                                               "scale": 0.05, "dim": 3}, "hp": {"p": 2}}],
}


@pytest.mark.parametrize("text,value", [("1e-3", 0.001), ("5E-2", 0.05), (".5", 0.5), ("1_000", 1000),
                                        ("-2e+1", -20.0), ("2.0e-3", 0.002), ("true", True), ("[1e-3, 2]", [0.001, 2])])
def test_hp_values_are_numbers_as_written(text, value):
    from ident3d.pipelines.train import parse_kv

    got = parse_kv([f"tau={text}"], "--hp")["tau"]
    assert got == value and type(got) is type(value), got


def test_config_files_read_exponents_as_numbers(tmp_path):
    """A synthetic config written with 2e-3, 5E-2, .5 and 1_000 runs and records numbers."""
    (tmp_path / "c.yaml").write_text(
        "name: tiny\n"
        "train: {objective: lp_infonce, encoder: mlp, encoder_args: {hidden: [16]}, out_dim: 3, steps: 40,\n"
        "        batch_size: 64, lr: 2e-3, amp: false}\n"
        "evaluate: {fit: 1_000, score: 500}\n"
        "rows:\n"
        "  - name: box normal\n"
        "    source: {kind: latent_pairs, space: box, conditional: normal, scale: 5e-2, dim: 3}\n"
        "    hp: {p: 2, tau: 5E-2, alpha: .5}\n")
    r = run_cli("synthetic", "--config", tmp_path / "c.yaml", "--out", tmp_path / "out", "--steps", "2",
                "--no-figures")
    assert r.returncode == 0, r.stderr
    cfg = json.loads((tmp_path / "out/cells/box_normal/seed_0/config.json").read_text())
    assert cfg["lr"] == 0.002 and cfg["objective_args"] == {"p": 2.0, "tau": 0.05, "alpha": 0.5}


def test_scm_specs_read_exponents_as_numbers():
    from ident3d.causal import parse_spec

    spec = parse_spec("nodes:\n  - {name: x, range: [-1e0, 1E0], mechanism: {type: uniform}}\n")
    assert spec["nodes"][0]["range"] == [-1.0, 1.0]


BAD_VALUES = [
    (["--hp", "tau=true"], "objective infonce's hyperparameter tau must be a finite number > 0, got true"),
    (["--hp", "tau=[1,2]"], "objective infonce's hyperparameter tau must be a finite number > 0, got [1, 2]"),
    (["--hp", "tau=nan"], "objective infonce's hyperparameter tau must be a finite number > 0, got nan"),
    (["--hp", "tau=1e400"], "objective infonce's hyperparameter tau must be a finite number > 0, got inf"),
    (["--hp", "tau=0"], "objective infonce's hyperparameter tau must be a finite number > 0, got 0"),
    (["--objective", "lp_infonce", "--hp", "p=two"],
     "objective lp_infonce's hyperparameter p must be a finite number > 0 or null, got 'two'"),
    (["--objective", "lp_infonce", "--hp", "negatives=all"],
     "objective lp_infonce's hyperparameter negatives must be one of 'batch', 'rolled', got 'all'"),
    (["--objective", "crl_tac", "--views", "learned_crop", "--encoder", "tac_cnn", "--hp", "train_channel=maybe"],
     "objective crl_tac's hyperparameter train_channel must be true or false, got 'maybe'"),
    (["--objective", "moco_v2", "--hp", "queue_size=2.5"],
     "objective moco_v2's hyperparameter queue_size must be a whole number >= 1, got 2.5"),
    (["--encoder-arg", "hidden=abc"], "encoder cnn's option hidden must be a whole number >= 1, got 'abc'"),
    (["--encoder", "mlp_vae", "--encoder-arg", "channels=2"], "encoder mlp_vae's option channels must be one of 1, 3"),
]


@pytest.mark.parametrize("extra,expected", BAD_VALUES)
def test_bad_hp_and_encoder_values_are_one_line(tmp_path, extra, expected):
    args = ["--data", tmp_path / "none.zarr", "--out", tmp_path / "run", "--encoder", "cnn", "--batch-size", "8",
            "--steps", "2", "--no-progress", "--views", "colour"]
    r = run_cli("train", *args, *extra)
    lines = r.stderr.strip().splitlines()
    assert r.returncode == 2 and len(lines) == 1 and "Traceback" not in r.stderr, r.stderr
    assert expected in lines[0], lines[0]
    assert not (tmp_path / "run").exists()


def test_config_hp_values_are_checked_by_the_same_declaration(tmp_path):
    cfg = json.loads(json.dumps(TINY_SYNTHETIC))
    cfg["rows"][0]["hp"] = {"p": 2, "symmetric": "maybe"}
    (tmp_path / "c.yaml").write_text(yaml.safe_dump(cfg))
    r = run_cli("synthetic", "--config", tmp_path / "c.yaml", "--out", tmp_path / "out")
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1, r.stderr
    assert "objective lp_infonce's hyperparameter symmetric must be true or false, got 'maybe'" in r.stderr
    assert str(tmp_path / "c.yaml") in r.stderr and not (tmp_path / "out").exists()


def test_direct_construction_checks_and_converts_the_declaration():
    from ident3d.training.encoders import build_encoder
    from ident3d.training.objectives import OBJECTIVES

    seen = {}

    @OBJECTIVES.register("test_seen_tau")
    class Seen(OBJECTIVES.get("infonce")):
        """Test only: records the tau its __init__ receives."""

        def __init__(self, encoder, *, tau: float = 0.5):
            seen["tau"] = tau
            super().__init__(encoder, tau=tau)

    try:
        obj = OBJECTIVES.get("test_seen_tau")(build_encoder("cnn", 4, 32), tau=1)
    finally:
        OBJECTIVES.unregister("test_seen_tau")
    assert obj.tau == 1.0 and type(seen["tau"]) is float  # converted to the declared type before __init__ runs
    with pytest.raises(UserError, match="objective beta_vae's hyperparameter decoder_width must be a whole number >= 16"):
        OBJECTIVES.get("beta_vae")(build_encoder("cnn", 4, 32), decoder_width=8)


def test_list_shows_the_declarations():
    r = run_cli("train", "--list")
    assert r.returncode == 0
    assert "--hp: tau=1.0 (a finite number > 0)" in r.stdout
    assert "train_channel=true (true or false)" in r.stdout
    assert "--encoder-arg: hidden=100 (a whole number >= 1), width=32 (a whole number >= 1)" in r.stdout


# ----- whole configs: parse() (issue 43 §1) ----------------------------------------------------------------------
def test_parse_builds_nested_types_and_names_the_key_path_of_the_first_bad_value():
    """A config parsed by its annotations: nested dataclasses, tuples from lists, dicts, a tagged union and a partial
    TrainConfig section come back typed (and converted: 1 -> 1.0 where a float is declared); each bad value is one
    line at its key path. Negative control: the same dict with the value fixed parses."""
    from dataclasses import dataclass, field
    from typing import Annotated

    from ident3d.training.config import TrainConfig
    from ident3d.training.hparams import ConfigError, Count, PartialOf, Tagged, parse

    @dataclass(frozen=True)
    class A:
        a: Count

    @dataclass(frozen=True)
    class B:
        b: str

    pick = lambda v, path: A if isinstance(v, dict) and "a" in v else B  # noqa: E731
    Train = Annotated[dict, PartialOf(TrainConfig, frozenset({"data"}))]

    @dataclass(frozen=True)
    class Row:
        name: str
        train: Train = field(default_factory=dict)

    @dataclass(frozen=True)
    class Config:
        rows: tuple[Row, ...]
        stores: dict[str, Annotated[A | B, Tagged(pick)]]
        seeds: tuple[Count, ...] = (0,)

    good = {"rows": [{"name": "r", "train": {"lr": 1, "steps": 5}}], "stores": {"x": {"a": 2}, "y": {"b": "t"}}}
    cfg = parse(Config, good)
    assert cfg == Config(rows=(Row("r", {"lr": 1.0, "steps": 5}),), stores={"x": A(2), "y": B("t")})
    assert type(cfg.rows[0].train["lr"]) is float
    for edit, path, text in [
        (lambda c: c["rows"][0]["train"].update(steps=2.5), "rows[0].train.steps", "must be a whole number >= 1, got 2.5"),
        (lambda c: c["rows"][0]["train"].update(stepz=1), "rows[0].train.stepz", "is not a setting here; allowed: "),
        (lambda c: c["stores"]["x"].update(a=0), "stores.x.a", "must be a whole number >= 1, got 0"),
        (lambda c: c["stores"]["y"].update(b=[1]), "stores.y.b", "must be text, got [1]"),
        (lambda c: c.update(seeds=3), "seeds", "must be a list, got 3"),
        (lambda c: c["rows"][0].pop("name"), "rows[0].name", "is missing (required: name)"),
        (lambda c: c.update(extra=1), "extra", "is not a setting here; allowed: rows, stores, seeds"),
    ]:
        bad = json.loads(json.dumps(good))
        edit(bad)
        with pytest.raises(ConfigError) as exc:
            parse(Config, bad)
        assert (exc.value.path, exc.value.text[:len(text)]) == (path, text), str(exc.value)
