"""`python -u -m trainer ...`: the DFlash drafter trainer (see trainer/train.py for options and exit codes)."""

from .train import main

raise SystemExit(main())
