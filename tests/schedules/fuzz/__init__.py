"""The random-schedule differential fuzzer: random small programs, random schedule
steps, and every accepted schedule checked against the unscheduled function through the
interpreter and the llvm build (see :mod:`.check`).  ``tests/schedules/test_differential``
runs it; ``python -m benchmarks.fuzz --minutes N`` runs it longer.
"""
