"""Cuvil measured against the scheduled GPU functions of Apache TVM's tests.

``python -m benchmarks.tvm_gpu_suite --tvm PATH [--ref v0.23.0]`` reads TVM's tests of
software pipelining, cross-thread reduction, thread sync and MetaSchedule's CUDA
sketches and multi-level tiling from the user's TVM checkout (nothing of TVM is stored
here), collects every ``@T.prim_func`` that binds GPU threads (:mod:`.cases`,
:mod:`.harvest`), and checks each (:mod:`.check`): the pass rate and a bucket per case
(:mod:`.report`).
"""
