"""Cuvil measured against Apache TVM's schedule-primitive tests.

``python -m benchmarks.tvm_schedule_suite --tvm PATH [--ref v0.23.0]`` reads
``tests/python/tir-schedule`` from the user's TVM checkout (nothing of TVM is stored
here), runs it with pytest against :mod:`shim` (a small ``tvm`` package mapping the
API those tests use onto Cuvil), and reports each case's bucket (see :mod:`.outcome`).
"""
