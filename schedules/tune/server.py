"""The entry point of a warm tuning server: ``python -m schedules.tune.server FD``.

A module of its own (not imported by the package) so that running it does not import
itself twice; the server is :func:`.executor.serve`.

Example::

    >>> from schedules.tune import server
    >>> server.__name__
    'schedules.tune.server'
"""

import sys

if __name__ == "__main__":
    from .executor import serve
    serve(int(sys.argv[1]))
