"""``python -m dpcvx``: the ``dpcvx`` command line (see :mod:`dpcvx.cli`)."""

from __future__ import annotations

from dpcvx.cli import main

if __name__ == "__main__":
    raise SystemExit(main())
