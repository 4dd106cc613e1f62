from floecli.main import main

raise SystemExit(main())
