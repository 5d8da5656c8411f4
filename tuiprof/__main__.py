import sys

from tuiprof.cli import main

sys.exit(main())
