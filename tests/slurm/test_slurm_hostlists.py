"""Slurm host lists and GPU index lists (pure).

Covers: ranges and lists inside brackets with zero padding kept, several items, several
bracket groups multiplying out, plain names; `gres_detail` index lists; malformed lists and
oversized ranges refused before expanding, naming the list.
"""

from __future__ import annotations

import pytest

from integrations.errors import InvalidName
from integrations.slurm.hostlists import expand_hostlist, expand_indices, gres_indices


def test_ranges_and_lists_in_brackets_keep_their_padding() -> None:
    assert expand_hostlist("gpu-node-[00-03,07]") == [
        "gpu-node-00", "gpu-node-01", "gpu-node-02", "gpu-node-03", "gpu-node-07",
    ]  # fmt: skip
    assert expand_hostlist("gpu-node-[08-09],login1,dgx[1,3]") == [
        "gpu-node-08", "gpu-node-09", "login1", "dgx1", "dgx3",
    ]  # fmt: skip
    assert expand_hostlist("r[1-2]n[01-02]") == ["r1n01", "r1n02", "r2n01", "r2n02"]
    assert expand_hostlist("") == [] and expand_hostlist("gpu-node-05") == ["gpu-node-05"]


def test_gpu_indices_from_gres_detail() -> None:
    assert gres_indices("gpu:h100:4(IDX:0-3)") == [0, 1, 2, 3]
    assert gres_indices("gpu:h100:3(IDX:0,5-6)") == [0, 5, 6]
    assert gres_indices("gpu:h100:0(IDX:N/A)") == [] and expand_indices("") == []


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("gpu-node-[00-03", "unclosed"),
        ("gpu-node-00]", "unbalanced"),
        ("gpu-node-[a-b]", "is not N or N-M"),
        ("gpu-node-[09-03]", "goes backwards"),
        ("n[0-99999]x[0-99999]", "names 10000000000 hosts"),
    ],
)
def test_malformed_or_huge_lists_are_refused(text: str, message: str) -> None:
    with pytest.raises(InvalidName, match=message):
        expand_hostlist(text)
