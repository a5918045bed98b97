"""`python -m cudablame ...` is `cudablame ...`."""

from . import main

main()
