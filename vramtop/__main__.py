from vramtop.cli import main

raise SystemExit(main())
