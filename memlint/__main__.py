"""Allow ``python -m memlint``."""

from memlint.cli import main

raise SystemExit(main())
