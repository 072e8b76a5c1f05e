"""How a signal's samples spread: median, outliers against the peers, label spreads.

Covers: the median of odd/even/empty inputs; one straggler among many identical peers is found
in the right direction; small jitter among healthy peers is not an outlier; too few samples
never produce outliers; a rack of low readings among a large job is found node by node; the
majority label value and the nodes that differ; ties broken by value, not sample order.
"""

from __future__ import annotations

from bot.diagnosis.spread import find_outliers, label_spread, median


def test_median_of_odd_even_and_empty_inputs() -> None:
    assert median([3.0, 1.0, 2.0]) == 2.0
    assert median([4.0, 1.0, 2.0, 3.0]) == 2.5
    assert median([]) is None


def test_one_slow_rank_among_identical_peers_is_a_high_outlier() -> None:
    step_times = [1.20] * 31 + [1.95]
    found = find_outliers(step_times)
    assert found.high == (31,)
    assert found.low == ()


def test_one_throttled_gpu_is_a_low_outlier() -> None:
    clocks = [1980.0] * 63 + [1005.0]
    assert find_outliers(clocks).low == (63,)


def test_jitter_among_healthy_peers_is_not_an_outlier() -> None:
    tensor_active = [0.42, 0.41, 0.43, 0.42, 0.40, 0.44, 0.42, 0.41]
    found = find_outliers(tensor_active)
    assert found.low == () and found.high == ()


def test_two_samples_never_have_outliers() -> None:
    found = find_outliers([1.0, 100.0])
    assert found.low == () and found.high == ()


def test_a_rack_of_low_clocks_in_a_large_job_is_found_sample_by_sample() -> None:
    clocks = [1980.0] * 56 + [1100.0] * 8
    assert find_outliers(clocks).low == tuple(range(56, 64))


def test_label_spread_names_the_majority_and_the_nodes_that_differ() -> None:
    spread = label_spread(
        {"gpu-node-00": "550.54.15", "gpu-node-01": "535.104.05", "gpu-node-02": "550.54.15"}
    )
    assert spread.majority == "550.54.15"
    assert spread.distinct == ("550.54.15", "535.104.05")
    assert spread.minority_nodes == ("gpu-node-01",)


def test_label_spread_ties_go_to_the_value_sorting_first() -> None:
    spread = label_spread({"b": "2", "a": "1"})
    assert spread.majority == "1"
    assert spread.minority_nodes == ("b",)
