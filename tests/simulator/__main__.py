import sys

from .simulator import main

sys.exit(main())
