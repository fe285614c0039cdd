import sys

from memlog.cli import main

sys.exit(main())
