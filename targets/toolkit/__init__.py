"""The top layer: tools built from the language, the schedules and the backends
together.

Everything below it keeps to its own layer (``cuvil_tir`` imports nothing above it;
``schedules`` reaches backends only through the contract of :mod:`cuvil_tir.target`;
no backend imports another).  What needs schedules *and* backends at once lives here:

* :mod:`.cli` -- the ``cuvil`` command (``show``, ``lower``, ``build``, ``run``,
  ``tune``, ``cache``); ``python -m targets.toolkit`` runs it too;
* :mod:`.cuda_recipes` -- GPU schedules for common workloads (tiled GEMM, tensor
  cores, reductions, softmax, conv2d), used by tutorial 07 and the CUDA tests;
* :mod:`.npu` -- the example schedules for the toy NPU of
  :mod:`targets.accel.examples.toy_npu` (GEMM, conv2d, a fused GEMM + requantization).

Example::

    >>> from targets.toolkit.cli import make_parser
    >>> make_parser().parse_args(["build", "k.py"]).target
    'llvm'
"""
