"""Every schedule primitive module; importing one registers its primitives.

One import per line, so that adding a module is a one-line change.

Example::

    >>> from schedules.primitive import PRIMITIVES
    >>> "split" in PRIMITIVES and "get_block" in PRIMITIVES
    True
"""

from . import queries
from . import loops
from . import loop_kinds
from . import compute_location
from . import inline
from . import reduction
from . import blockize
from . import cache
from . import cache_inplace
from . import storage
from . import tensorize
from . import layout
from . import pad
from . import block_layout
from . import reindex
from . import axis_separator
from . import set_dtype
from . import partition
from . import merge
from . import sample_location
from . import postproc
from . import cache_index
from . import rolling_buffer
from . import decompose_padding
from . import buffer_access
from . import read_write_at
from . import widen
