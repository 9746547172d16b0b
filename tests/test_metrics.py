from math import comb

import pytest

from saturated_dag.metrics import pass_at_k


@pytest.mark.parametrize("c", range(9))
def test_n8_pass1_is_fraction_and_pass8_is_any(c: int) -> None:
    assert pass_at_k(8, c, 1) == pytest.approx(c / 8)
    assert pass_at_k(8, c, 8) == (1.0 if c > 0 else 0.0)


@pytest.mark.parametrize("c", range(11))
def test_n10_k3_closed_form(c: int) -> None:
    expected = 1 - comb(10 - c, 3) / comb(10, 3) if 10 - c >= 3 else 1.0
    assert pass_at_k(10, c, 3) == pytest.approx(expected)


def test_invalid_counts() -> None:
    with pytest.raises(ValueError):
        pass_at_k(8, 9, 1)
    with pytest.raises(ValueError):
        pass_at_k(8, 1, 9)
