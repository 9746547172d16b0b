from concurrent.futures import ThreadPoolExecutor

import pytest

from saturated_dag.tasks.verification import extract_last_boxed, verify_answer, verify_many

# (completion, gold, correct under math_verify, correct under last_boxed)
CASES = [
    ("so the answer is \\boxed{-544}.", "-544", True, True),
    ("\\boxed{544}", "-544", False, False),
    ("\\boxed{1,234}", "1234", True, True),
    ("\\boxed{1 234}", "1234", True, True),  # Math-Verify alone reads 1 234 as 235
    ("so the total is \\boxed{ 1 234 }.", "1234", True, True),
    ("\\boxed{1234.0}", "1234", True, True),
    ("\\boxed{1234.5}", "1234", False, False),
    ("\\boxed{}", "0", False, False),
    ("3 + 4 = 7 \\boxed{}", "7", False, False),  # an empty last box is no answer
    ("\\boxed{7} \\boxed{}", "7", False, False),
    ("\\boxed{123456789012}", "123456789012", True, True),
    ("\\boxed{123456789013}", "123456789012", False, False),
    ("\\boxed{-987654321098}", "-987654321098", True, True),
    ("\\boxed{\\frac{1}{2}}", "0.5", True, True),
    ("\\boxed{12", "12", False, False),  # unclosed
    # a final stated answer: Math-Verify reads it, the boxed-only rule does not
    ("The answer is 12.", "12", True, False),
    ("Final answer: $12.00", "12", True, False),
    ("8 + 4 = 12", "12", True, False),
    # two different boxed answers: Math-Verify builds a set that never verifies
    ("\\boxed{5} ... \\boxed{12}", "12", False, True),
    ("first \\boxed{5}, then corrected: \\boxed{12}", "12", False, True),
    ("first \\boxed{12}, then changed to \\boxed{5}", "12", False, False),
    ("\\boxed{12} and again \\boxed{12}", "12", True, True),
    ("nothing here", "12", False, False),
]


@pytest.mark.parametrize(("completion", "gold", "correct", "_boxed"), CASES)
def test_math_verify_mode(completion: str, gold: str, correct: bool, _boxed: bool) -> None:
    assert verify_answer(completion, gold).correct is correct  # the default mode
    assert verify_answer(completion, gold, "math_verify").correct is correct


@pytest.mark.parametrize(("completion", "gold", "_mv", "correct"), CASES)
def test_last_boxed_mode(completion: str, gold: str, _mv: bool, correct: bool) -> None:
    assert verify_answer(completion, gold, "last_boxed").correct is correct


def test_verdict_holds_the_extracted_answer_in_both_modes() -> None:
    assert verify_answer("The answer is 12.", "12").answer == "12"
    assert verify_answer("Final answer: $12.00", "12").answer == "12.00"
    assert verify_answer("2 + 3 = 5 so \\boxed{5}", "5").answer == "5"
    assert verify_answer("2 + 3 = 5 so \\boxed{5}", "5", "last_boxed").answer == "5"
    assert verify_answer("The answer is 12.", "12", "last_boxed").answer is None
    assert verify_answer("\\boxed{}", "3").answer == ""
    assert verify_answer("\\boxed{}", "3", "last_boxed").answer == ""
    assert verify_answer("nothing here", "3").answer is None


def test_extract_last_boxed_handles_nesting_and_absence() -> None:
    assert extract_last_boxed("x \\boxed{\\frac{1}{2}} y") == "\\frac{1}{2}"
    assert extract_last_boxed("a \\boxed{1} b \\boxed{2}") == "2"
    assert extract_last_boxed("nothing here") is None


@pytest.mark.parametrize("mode", ["math_verify", "last_boxed"])
def test_gold_that_cannot_parse_is_an_error(mode: str) -> None:
    with pytest.raises(ValueError, match="gold answer"):
        verify_answer("\\boxed{3}", "", mode)  # type: ignore[arg-type]


def test_unknown_mode_is_an_error() -> None:
    with pytest.raises(ValueError, match="unknown answer check 'boxed'"):
        verify_answer("\\boxed{3}", "3", "boxed")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="unknown answer check"):
        verify_many(["\\boxed{3}"], ["3"], mode="boxed")  # type: ignore[arg-type]


def test_safe_in_worker_threads() -> None:
    # Math-Verify's default timeouts use signal.alarm, which raises outside the main thread.
    with ThreadPoolExecutor(2) as pool:
        results = list(pool.map(lambda g: verify_answer(f"The answer is \\boxed{{{g}}}", g).correct,
                                [str(i) for i in range(-5, 5)]))
    assert all(results)


@pytest.mark.parametrize(("mode", "expected"), [("math_verify", 40), ("last_boxed", 20)])
def test_process_pool_matches_serial_and_receives_the_mode(mode: str, expected: int) -> None:
    # even i: a stated answer (verified only by math_verify); odd i: a boxed one
    completions = [f"The answer is {i}." if i % 2 == 0 else f"\\boxed{{{i}}}" for i in range(60)]
    golds = [str(i if i % 3 else i + 1) for i in range(60)]
    serial = verify_many(completions, golds, mode=mode)  # type: ignore[arg-type]
    parallel = verify_many(completions, golds, workers=2, min_parallel=10,
                           mode=mode)  # type: ignore[arg-type]
    assert serial == parallel
    assert sum(v.correct for v in serial) == expected


def test_length_mismatch_is_an_error() -> None:
    with pytest.raises(ValueError, match="2 completions but 1 golds"):
        verify_many(["a", "b"], ["1"])
