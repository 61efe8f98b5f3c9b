"""``python -m noveld``: the same entry point as the ``noveld`` console script."""

from noveld.launch import main

raise SystemExit(main())
