"""What every backend's ``load`` shares: the ``Module`` users call, argument checks,
run-time check reports, the native CPU calling ABI and per-block profiling.

This layer imports only ``cuvil_tir``; every backend imports it, and no backend
imports another.

Example::

    >>> from targets.runtime import Module, NativeCode
    >>> NativeCode.source_formats
    ()
"""

from .argcheck import make_caller
from .checks import CheckReport, check_report, check_sites, site_comments
from .module import Module, NativeCode
from .native import (DATA_OFFSET, STATUS_ALLOC_FAILED, STATUS_CHECK_FAILED, STATUS_MESSAGES,
                     native_entry, raising, scalar_ctype, size_vars_of, status_error)
from .profile import ProfileResult, profile

__all__ = ["CheckReport", "DATA_OFFSET", "Module", "NativeCode", "ProfileResult",
           "STATUS_ALLOC_FAILED", "STATUS_CHECK_FAILED", "STATUS_MESSAGES", "check_report",
           "check_sites", "make_caller", "native_entry", "profile", "raising",
           "scalar_ctype", "site_comments", "size_vars_of", "status_error"]
