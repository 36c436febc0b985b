import sys

from sparselen.cli import main

sys.exit(main())
