"""benchmarks/synthetic_step.py (issue 36 §3): its --tiny run for real (two rows of paper 001's synthetic config, two
variants, 2 steps; tests/test_benchmarks_tiny.py leaves this script to this test), its JSON, and the table wall time
it implies, checked by hand."""

import json
import math

from helpers import benchmark

ss = benchmark("synthetic_step")


def test_a_short_run_records_each_row_and_variant(tmp_path):
    out = tmp_path / "step.json"
    got = ss.main(["--tiny", "--out", str(out)])  # rows 0 and 4, fp32 and one_call, 2 steps after 1
    assert json.loads(out.read_text()) == json.loads(json.dumps(got)) and out.with_suffix(".png").is_file()
    rows = got["rows"]
    assert list(rows) == ["box, normal -> p=2 (matching)", "box, normal -> p=3 (mismatch)"]
    assert [rows[r]["steps"] for r in rows] == [20000, 8000] and [rows[r]["batch_size"] for r in rows] == [512, 256]
    for r in rows.values():
        assert set(r["ms_per_step"]) == {"fp32", "one_call"} and all(v > 0 for v in r["ms_per_step"].values())
        assert 0 < r["matmul_share"] < 1
    # the MLP 10-100-200-200-100-10 on two views of 512: forward + backward of the linear layers dominate the count
    macs = 10 * 100 + 100 * 200 + 200 * 200 + 200 * 100 + 100 * 10
    assert 3 * 2 * macs * 2 * 512 / 1e9 < rows["box, normal -> p=2 (matching)"]["gflop_per_step"] < 0.7
    by_hand = {v: (20000 * rows["box, normal -> p=2 (matching)"]["ms_per_step"][v]
                   + 8000 * rows["box, normal -> p=3 (mismatch)"]["ms_per_step"][v]) / 1000 * 3 / 2 / 60
               for v in ("fp32", "one_call")}
    assert all(math.isclose(got["table_training_min"]["by_variant"][v], by_hand[v]) for v in by_hand)


def test_the_wall_time_leaves_out_a_variant_some_row_lacks():
    got = ss.row_wall({"a": 100, "b": 10}, {"a": {"fp32": 10.0, "bf16": 5.0}, "b": {"fp32": 20.0}}, seeds=3,
                      workers=2)
    assert got == {"fp32": (100 * 10.0 + 10 * 20.0) / 1000 * 3 / 2 / 60}
