"""benchmarks/fuzz.py: the fuzzer's command line, in its quick forms."""

from benchmarks import fuzz


def test_a_few_cases_run_and_are_reported(capsys):
    assert fuzz.main(["--cases", "3", "--seed", "10"]) == 0
    out = capsys.readouterr().out
    assert "fuzzing with seed 10 (rerun: --seed 10)" in out
    assert "seed 10: 3 cases in" in out and "steps accepted" in out
    assert "refused by error:" in out


def test_replay_shows_the_steps_of_one_case(capsys):
    from tests.schedules.fuzz.check import run_case
    case = run_case(7, build=False)
    assert case.failure is None
    assert fuzz.main(["--replay", "7", "--no-build"]) == 0
    out = capsys.readouterr().out
    assert out.count("step ") == len(case.steps)
    assert f"case 7: no failure ({case.what}" in out
