"""``python -m slimvec`` runs the CLI."""

from slimvec.cli import main

main()
