import sys

from hybridmetric.cli import main

sys.exit(main())
