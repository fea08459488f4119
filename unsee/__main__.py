import sys

from unsee.cli import main

sys.exit(main())
