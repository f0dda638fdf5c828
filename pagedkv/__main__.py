from pagedkv.cli import main

raise SystemExit(main())
