"""``targets.cache``: the persistent compile cache (its home is the core,
:mod:`cuvil_tir.target.cache`, where the build driver uses it).

Where: ``CUVIL_CACHE_DIR``, else ``$XDG_CACHE_HOME/cuvil``, else ``~/.cache/cuvil``.
Off: ``CUVIL_CACHE=0``.  Bound: ``CUVIL_CACHE_MAX_BYTES`` (default 1 GiB).  Every
backend's programs are stored (accelerators included).

Example::

    >>> import targets
    >>> sorted(targets.cache.info())
    ['bytes', 'directory', 'enabled', 'entries', 'max_bytes', 'state', 'why']
"""

import sys

from cuvil_tir.target.cache import (Store, cache_key, clear, code_identity, directory,
                                    enabled, info, state, store)

# the module ``targets.cache.store`` stays importable under its old name
sys.modules[__name__ + ".store"] = sys.modules["cuvil_tir.target.cache.store"]

__all__ = ["Store", "cache_key", "clear", "code_identity", "directory", "enabled", "info",
           "state", "store"]
