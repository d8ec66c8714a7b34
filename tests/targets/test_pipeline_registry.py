"""One registry of target kinds: T.lower and targets.build run the same passes for a
kind, its pipeline(target) read at each lowering."""

from __future__ import annotations

import numpy as np
import pytest

import cuvil_tir as T
import targets
from cuvil_tir.target import get_pipeline
from cuvil_tir.transform import PassContext, default_pipeline, pass_name
from tests import workloads as W


def _kind(name, passes=None, pipeline=None):
    """The llvm backend under another name, with its own passes."""
    class Kind(type(targets.get_target_kind("llvm"))):
        def pipeline(self, target):
            if pipeline is not None:
                return pipeline(target)
            return default_pipeline() if self.passes is None else self.passes
    kind = Kind()
    kind.name, kind.passes = name, passes
    return kind


def _tagging(tag, seen=None):
    def tag_pass(func):
        if seen is not None:
            seen.append(PassContext.current().target)
        return func.with_attr("tag", tag)
    tag_pass.pass_name = f"tag_{tag}"
    return tag_pass


@pytest.fixture
def kind_name():
    name = "registry-test"
    yield name
    if name in targets.list_targets():
        targets.unregister_target(name)


def test_re_registering_changes_both_lower_and_build(kind_name):
    f = W.elementwise_chain(8).func
    targets.register_target(_kind(kind_name, default_pipeline() + [_tagging("one")]))
    assert T.lower(f, kind_name).entry.attr("tag") == "one"
    assert targets.build(f, kind_name).lowered.entry.attr("tag") == "one"
    targets.register_target(_kind(kind_name, default_pipeline() + [_tagging("two")]),
                            replace=True)
    assert T.lower(f, kind_name).entry.attr("tag") == "two"
    assert targets.build(f, kind_name).lowered.entry.attr("tag") == "two"


def test_unregistering_removes_the_kind(kind_name):
    targets.register_target(_kind(kind_name, default_pipeline()))
    assert kind_name in targets.list_targets()
    targets.unregister_target(kind_name)
    assert kind_name not in targets.list_targets()
    with pytest.raises(T.TargetError, match=f"unknown target '{kind_name}'"):
        T.lower(W.elementwise_chain(8).func, kind_name)


def test_a_default_kind_and_a_changed_passes_attribute(kind_name):
    kind = _kind(kind_name, None)
    targets.register_target(kind)
    assert [pass_name(p) for p in get_pipeline(kind_name)] == \
        [pass_name(p) for p in default_pipeline()]
    # the registry reads the kind at each lowering: it never keeps a stale copy
    kind.passes = default_pipeline() + [_tagging("late")]
    f = W.elementwise_chain(8).func
    assert T.lower(f, kind_name).entry.attr("tag") == "late"
    assert targets.build(f, kind_name).lowered.entry.attr("tag") == "late"


def test_pipeline_of_the_target_and_the_same_target_in_the_context(kind_name):
    seen = []

    def pipeline(target):
        return default_pipeline() + [_tagging(f"O{target.options['opt_level']}", seen)]

    targets.register_target(_kind(kind_name, pipeline=pipeline))
    w = W.elementwise_chain(8)
    f = w.func
    text = f"{kind_name} -opt-level=2"
    assert T.lower(f, text).entry.attr("tag") == "O2"
    mod = targets.build(f, text)
    assert mod.lowered.entry.attr("tag") == "O2"
    assert seen == [targets.Target(text)] * 2
    arrays = w.make_inputs(np.random.default_rng(0))
    mod(*arrays)
    w.check(arrays)


def test_llvm_lowering_is_the_same_in_lower_and_build():
    f = W.matmul(8, 8, 8).func
    lowered = T.lower(f, "llvm -mcpu=haswell")
    built = targets.build(f, "llvm -mcpu=haswell").lowered
    assert T.structural_equal(lowered.entry.body, built.entry.body)


def test_a_kind_that_is_not_a_target_kind_or_lacks_a_step_is_refused():
    with pytest.raises(targets.TargetError, match="expected a TargetKind"):
        targets.register_target(type("K", (), {"name": "bad-kind"})())

    class NoLoad(T.TargetKind):
        name = "bad-kind"

        def codegen(self, module, target):
            return None

    with pytest.raises(targets.TargetError, match="'bad-kind' does not define both steps"):
        targets.register_target(NoLoad())
    assert "bad-kind" not in targets.list_targets()


def test_a_pass_that_is_not_callable_is_a_lowering_error(kind_name):
    targets.register_target(_kind(kind_name, [3]))
    with pytest.raises(T.LoweringError, match=f"pipeline of target kind '{kind_name}': "
                                              "pass 3 is not callable"):
        T.lower(W.elementwise_chain(8).func, kind_name)


def test_a_pipeline_returning_junk_is_a_lowering_error(kind_name):
    targets.register_target(_kind(kind_name, pipeline=lambda target: "lower_blocks"))
    with pytest.raises(T.LoweringError, match=f"pipeline of target kind '{kind_name}': "
                                              "expected a list of passes, found str"):
        T.lower(W.elementwise_chain(8).func, kind_name)
