"""Target options are declared by each kind (type, range, choices) and checked when the
Target is made: a wrong value is a TargetError naming the option, what it expects and
what was found, never a raw Python error or a later "code generator bug" (issue 25)."""

import pytest

import cuvil_tir as T
import targets
from targets import Target, TargetError


@pytest.mark.parametrize("kind, options, message", [
    ("llvm", {"opt_level": -1},
     r"Target 'llvm': option 'opt_level' expects an int from 0 to 3 \(LLVM's optimisation "
     r"level\), found -1"),
    ("llvm", {"opt_level": 7}, r"option 'opt_level' expects an int from 0 to 3 .*found 7"),
    ("llvm", {"opt_level": "3"}, r"option 'opt_level' expects an int from 0 to 3 .*found '3'"),
    ("llvm", {"opt_level": True}, r"option 'opt_level' expects an int .*found True \(bool\)"),
    ("llvm", {"num_cores": -4}, r"option 'num_cores' expects an int >= 0 .*found -4"),
    ("llvm", {"mcpu": 3}, r"option 'mcpu' expects a string .*found 3 \(int\)"),
    ("llvm", {"fast_math": "fastest"}, r"unknown fast-math flag 'fastest'"),
    ("c", {"openmp": "yes"}, r"Target 'c': option 'openmp' expects a bool \(True or False\) "
                            r".*found 'yes'"),
    ("c", {"cflags": None}, r"option 'cflags' expects a string .*found None"),
    ("cuda", {"arch": "sm_5"}, r"Target 'cuda': option 'arch' expects a string matching "
                               r".*found 'sm_5'"),
    ("cuda", {"arch": 80}, r"option 'arch' expects a string matching .*found 80 \(int\)"),
])
def test_a_wrong_option_value_names_the_option(kind, options, message):
    with pytest.raises(TargetError, match=message) as info:
        Target(kind, **options)
    assert info.value.code == "CVL-E106"


@pytest.mark.parametrize("text, message", [
    ("llvm -mcpu", r"option 'mcpu' expects a string .*found a flag without a value "
                   r"\(write -mcpu=\.\.\.\)"),
    ("llvm -opt-level=9", r"option 'opt_level' expects an int from 0 to 3 .*found 9"),
    ("c -openmp=yes", r"option 'openmp' expects a bool .*found 'yes'"),
    ("llvm -mcup=native", r"unknown option 'mcup'; known options: bounds_check, fast_math"),
    ("llvm -mcpu='haswell", r"cannot read the target string"),
])
def test_the_string_form_is_checked_the_same_way(text, message):
    with pytest.raises(TargetError, match=message):
        Target(text)


@pytest.mark.parametrize("text, options", [
    ("llvm -mcpu=", {}), ("llvm -mcpu=' '", {}), ("llvm", {"mcpu": ""}), ("c -cc=", {}),
    ("cuda -arch=", {})])
def test_an_empty_value_is_refused_where_it_names_nothing(text, options):
    # "llvm -mcpu=" was accepted and built for no CPU at all (issue 25)
    with pytest.raises(TargetError, match=r"option '(mcpu|cc|arch)' expects a string.*"
                       r"found (an empty string|a blank string ' ') \(write -\w+=VALUE\); "
                       r"fix: give a value as above, e\.g\. \w+='") as info:
        Target(text, **options)
    assert info.value.code == "CVL-E106"


def test_an_accelerators_compiler_must_not_be_empty():
    from targets.accel.accelerator import Accelerator
    opts = Accelerator.options
    with pytest.raises(TargetError, match=r"option 'cc' expects a string .*found an empty"):
        opts["cc"].check("npu", "cc", "")
    assert opts["cflags"].check("npu", "cflags", "") == ""


def test_an_empty_value_stays_valid_where_it_means_none():
    assert Target("llvm -mattr=").options["mattr"] == ""
    assert Target("c -cflags=").options["cflags"] == ""
    assert Target("llvm -fast-math=").options["fast_math"] == ""


def test_good_values_and_the_string_form_agree():
    assert Target("llvm -opt-level=0 -num-cores=2").options["opt_level"] == 0
    assert Target("c -openmp=false").options["openmp"] is False
    assert Target("cuda", arch="sm_90a").options["arch"] == "sm_90a"
    assert Target("llvm -fast-math").options["fast_math"] is True
    assert Target("llvm", fast_math="contract,reassoc") == \
        Target("llvm -fast-math=contract,reassoc")


def test_an_option_given_as_a_plain_default_is_checked_by_its_type():
    class Plain(type(targets.get_target_kind("llvm"))):
        name = "opt-plain"
        options = {"level": 1, "mode": "fast"}

    targets.register_target(Plain(), replace=True)
    try:
        assert Target("opt-plain -level=2").options == {"level": 2, "mode": "fast"}
        with pytest.raises(TargetError, match=r"option 'level' expects an int, found 'x'"):
            Target("opt-plain", level="x")
    finally:
        targets.unregister_target("opt-plain")


def test_a_bad_option_never_reaches_the_build():
    f = T.create_prim_func([T.placeholder((4,), name="A")])
    with pytest.raises(TargetError, match="option 'opt_level'"):
        targets.build(f, "llvm -opt-level=-1")


@pytest.mark.parametrize("kind, options, fix", [
    ("llvm", {"opt_level": 7}, r"fix: give a value as above, e.g\. opt_level=\d \(the default\)"),
    ("llvm", {"num_cores": -4}, r"fix: give a value as above, e.g\. num_cores=0 \(the default\)"),
    ("c", {"openmp": "yes"}, r"fix: give a value as above, e.g\. openmp=(True|False) "),
    ("cuda", {"arch": 80}, r"fix: give a value as above, e.g\. arch='sm_\d+a?' \(the default\)"),
    ("llvm", {"mcup": "native"}, r"unknown option 'mcup'; known options: .*; fix: did you mean "
                                 r"'mcpu'\?"),
    ("llvm", {"openmp": True}, r"unknown option 'openmp'; known options: .*; fix: remove it"),
])
def test_a_wrong_option_says_how_to_fix_it(kind, options, fix):
    with pytest.raises(TargetError, match=fix):
        Target(kind, **options)


def test_a_flag_without_a_value_says_how_to_fix_it():
    with pytest.raises(TargetError, match=r"found a flag without a value \(write -mcpu=\.\.\.\); "
                                          r"fix: give a value as above"):
        Target("llvm -mcpu")
